"""Long polling that confirms an update only after it is journaled.

PTB's ``Updater`` moves its offset past a batch as soon as it has fetched it, before any
handler ran; a crash then loses the batch. This loop calls the real ``Bot.get_updates`` and
advances the offset past an update only after ``handle`` returned for it and for every
update before it (which is after the gateway journaled them). The next ``getUpdates`` call carries the new offset, and that is what
confirms the update to Telegram. If ``handle`` raises (the disk is full, say), the offset
stays and the update is fetched again after a backoff. The updates of one batch are handled
chat by chat in order, different chats at the same time, so a burst's journal writes share
one commit.

Network failures reconnect with capped, jittered exponential backoff. ``409 Conflict``
means a second receiver for this token (another poller, or a webhook set elsewhere); it is
logged as such and retried slowly, since it resolves when the other side stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from telegram import Bot, Update
from telegram.error import Conflict, InvalidToken, RetryAfter, TelegramError

from channels.telegram.convert import ALLOWED_UPDATES
from channels.telegram.sender import retry_after_seconds
from gateway.core.backoff import Backoff
from gateway.core.lifecycle import waited

log = logging.getLogger(__name__)

Handler = Callable[[Update], Awaitable[None]]
StatusHook = Callable[[str | None], None]  # called with an error text, or None when healthy


class Poller:
    def __init__(
        self,
        bot: Bot,
        handle: Handler,
        *,
        timeout: int,
        backoff: Backoff,
        on_status: StatusHook = lambda error: None,
    ) -> None:
        self._bot = bot
        self._handle = handle
        self._timeout = timeout
        self._backoff = backoff
        self._on_status = on_status
        self.offset: int | None = None  # the next update id we want; all below are handled
        self._confirmed: int | None = None  # the offset Telegram was last told
        self._task: asyncio.Task[None] | None = None
        self._fetch: asyncio.Task[tuple[Update, ...]] | None = None
        self._stopping = asyncio.Event()
        self.last_update_at: float | None = None
        self._refused = False  # the last batch had an update the gateway did not accept

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="telegram-poller")

    async def stop(self, *, grace: float = 10.0) -> None:
        """Stop fetching; an update being handled finishes first, then its offset is confirmed."""
        self._stopping.set()
        if self._fetch is not None:
            self._fetch.cancel()
        if self._task is not None:
            try:
                await asyncio.wait_for(asyncio.shield(self._task), grace)
            except TimeoutError:
                self._task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await self._task
            self._task = None
        await self._confirm()

    async def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                updates = await self._get_updates()
            except asyncio.CancelledError:
                if self._stopping.is_set():
                    return
                raise
            except Conflict as exc:
                await self._failed(
                    "409 Conflict: another program is receiving updates for this bot token "
                    f"(a second poller or a webhook): {exc.message}",
                    level=logging.ERROR,
                    cap=True,
                )
                continue
            except InvalidToken:
                await self._failed("Telegram rejected the bot token", level=logging.ERROR, cap=True)
                continue
            except RetryAfter as exc:
                await self._pause(retry_after_seconds(exc))
                continue
            except TelegramError as exc:  # network errors, 5xx, timeouts
                await self._failed(f"getUpdates failed: {exc.message}")
                continue
            except Exception as exc:  # never let the intake loop die
                log.exception("telegram: unexpected polling failure")
                await self._failed(f"getUpdates failed: {exc!r}")
                continue
            self._backoff.reset()
            self._on_status(None)
            handled, failure = await self._handle_batch(updates)
            if handled:
                self.offset = updates[handled - 1][0] + 1
                self.last_update_at = time.time()
            if failure is not None:  # not journaled: keep the offset, fetch it again
                update_id, error = failure
                # said once until one is accepted: a full disk refuses every try (the
                # gateway says so itself), and a retry each second must not flood the log
                level = logging.DEBUG if self._refused else logging.WARNING
                self._refused = True
                await self._failed(f"update {update_id} not accepted: {error}", level=level)
            elif self._refused:
                self._refused = False
                log.info("telegram: updates are accepted again")

    async def _handle_batch(
        self, updates: list[tuple[int, Update | None]]
    ) -> tuple[int, tuple[int, Exception] | None]:
        """Handle a batch: each chat's updates in order, different chats at the same time (so
        their journal writes share one commit). Returns how many updates from the start of
        the batch were handled, and the first failure. The offset only moves past that
        prefix; updates after a failure that were handled anyway are fetched again and the
        journal recognises them as duplicates."""
        handled = [False] * len(updates)
        failures: dict[int, Exception] = {}

        async def in_order(indices: list[int]) -> None:
            for index in indices:
                if self._stopping.is_set():
                    return
                update = updates[index][1]
                if update is not None:
                    try:
                        await self._handle(update)
                    except Exception as exc:  # the chat's later updates wait for this one
                        failures[index] = exc
                        return
                handled[index] = True

        chats: dict[object, list[int]] = {}
        for index, (update_id, update) in enumerate(updates):
            chat = update.effective_chat if update is not None else None
            chats.setdefault(chat.id if chat is not None else f"update {update_id}", []).append(
                index
            )
        await asyncio.gather(*(in_order(indices) for indices in chats.values()))
        prefix = handled.index(False) if False in handled else len(handled)
        if not failures:
            return prefix, None
        first = min(failures)
        return prefix, (updates[first][0], failures[first])

    async def _get_updates(self) -> list[tuple[int, Update | None]]:
        """The next batch as ``(update_id, update)``; ``None`` for an update PTB cannot parse."""
        self._fetch = asyncio.ensure_future(
            self._bot.get_updates(
                offset=self.offset,
                timeout=self._timeout,
                allowed_updates=ALLOWED_UPDATES,
            )
        )
        try:
            updates = await self._fetch
        except (TelegramError, asyncio.CancelledError):
            raise
        except Exception:  # PTB could not parse the batch: find the bad update(s) ourselves
            return await self._salvage()
        finally:
            self._fetch = None
        self._confirmed = self.offset
        return [(update.update_id, update) for update in updates]

    async def _salvage(self) -> list[tuple[int, Update | None]]:
        """Parse a batch one update at a time, so a malformed one cannot block the rest."""
        params: dict[str, Any] = {"timeout": 0}
        if self.offset is not None:
            params["offset"] = self.offset
        # Bot API method names are case-insensitive; the lower-case spelling keeps PTB from
        # steering us back to get_updates, which is exactly what cannot parse this batch.
        raw: list[dict[str, Any]] = await self._bot.do_api_request("getupdates", api_kwargs=params)
        self._confirmed = self.offset
        batch: list[tuple[int, Update | None]] = []
        for data in raw:
            try:
                batch.append((int(data["update_id"]), Update.de_json(data, self._bot)))
            except Exception as exc:
                if not isinstance(data, dict) or "update_id" not in data:
                    raise
                log.warning("telegram: skipping malformed update %s: %s", data["update_id"], exc)
                batch.append((int(data["update_id"]), None))
        return batch

    async def _confirm(self) -> None:
        """Tell Telegram about updates handled since the last fetch (as PTB does on stop)."""
        if self.offset is None or self.offset == self._confirmed:
            return
        try:
            await self._bot.get_updates(offset=self.offset, timeout=0, limit=1)
            self._confirmed = self.offset
        except TelegramError as exc:  # they come again next start and are seen as duplicates
            log.info("telegram: could not confirm the last updates on stop: %s", exc)

    async def _failed(self, error: str, *, level: int = logging.WARNING, cap: bool = False) -> None:
        """Report ``error`` and wait out the next backoff step (``cap``: at least 5 s)."""
        self._on_status(error)
        delay = self._backoff.next()
        if cap:
            delay = max(delay, min(self._backoff.cap, 5.0))
        log.log(level, "telegram: %s; retrying in %.1fs", error, delay)
        await self._pause(delay)

    async def _pause(self, seconds: float) -> None:
        await waited(self._stopping.wait(), seconds)
