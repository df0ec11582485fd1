"""A fake Telegram Bot API server for python-telegram-bot, unmodified, on 127.0.0.1.

It keeps what the real server keeps for one bot: a queue of updates that ``getUpdates``
long-polls and confirms by ``offset``, the messages the bot sent (validated like Telegram
does: at most 4096 UTF-16 units, entities inside the text), files for ``getFile`` and
downloads, the webhook and the command list. Tests script failures per method (429 with
``retry_after``, 5xx, 409, "can't parse entities").

Inline keyboards: a sent message keeps its ``reply_markup``; :meth:`FakeTelegram.press`
pushes the ``callback_query`` a tap on one of its buttons makes, and ``answerCallbackQuery``
and ``editMessageReplyMarkup`` are answered (and recorded) as Telegram does.

Message ids are numbered as Telegram numbers them: a supergroup or channel (``-100…``) has
a counter of its own; every private chat and basic group of the bot shares the bot's one
counter, so ids there interleave across chats. Edits answer as Telegram does: "message to
edit not found" (no such message in that chat), "message can't be edited" (not the bot's),
"message is not modified" (same text and buttons), "there is no text in the message to
edit" (a photo or file).

Holding a call (:meth:`FakeTelegram.hold`, tests/fakes/holds.py): the fake keeps the
request open until the test lets go, having made the message first or not at all; a test
kills the gateway process while a call is held: the instant of a send.

It also serves an OpenAI-compatible ``/v1/audio/transcriptions`` for voice-note tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from channels.buckets import Rate
from channels.telegram.adapter import TelegramChannel
from channels.telegram.sender import Pacing
from gateway.config.settings import Settings
from gateway.core.backoff import Backoff
from tests.fakes.holds import Hold, Holds

# Pacing loose enough that tests never wait for a slot (the pacing tests use their own).
FAST_PACING = Pacing(
    per_chat=Rate(100, burst=100),
    per_group=Rate(100, burst=100),
    overall=Rate(1000, burst=1000),
    probes=Rate(1000, burst=1000),
)


def fast_channel(settings: Settings) -> TelegramChannel:
    """The Telegram channel of ``settings`` with test pacing and a backoff of milliseconds."""
    return TelegramChannel(
        settings.telegram,
        settings.channel_context(),
        pacing=FAST_PACING,
        backoff=Backoff(base=0.01, cap=0.05),
    )


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def utf16_slice(text: str, offset: int, length: int) -> str:
    """The part of ``text`` an entity covers (Telegram counts in UTF-16 code units)."""
    units = text.encode("utf-16-le")
    return units[2 * offset : 2 * (offset + length)].decode("utf-16-le")


@dataclass
class Call:
    method: str
    params: dict[str, Any]
    at: float = field(default_factory=time.perf_counter)
    files: dict[str, bytes] = field(default_factory=dict)
    result: Any = None  # what the fake answered, when it succeeded


@dataclass
class Failure:
    status: int
    description: str
    retry_after: int | None = None
    times: int = 1
    skip: int = 0  # let this many calls through first
    chat_id: int | None = None  # only calls for this chat (None: any)

    def applies(self, params: dict[str, Any]) -> bool:
        return self.chat_id is None or str(params.get("chat_id")) == str(self.chat_id)


def private_space(chat_id: int) -> bool:
    """Private chats and basic groups number their messages with the bot's own counter;
    supergroups and channels (ids ``-100…``) each have one of their own."""
    return not str(chat_id).startswith("-100")


class FakeTelegram:
    def __init__(self, token: str = "123456:TEST-TOKEN", *, username: str = "switchboard_bot"):
        self.token = token
        self.bot_id = int(token.split(":", 1)[0])
        self.username = username
        self.calls: list[Call] = []
        self.updates: deque[dict[str, Any]] = deque()
        self.confirmed_offset = 0  # updates below this id were confirmed by getUpdates
        self.pushed_at: dict[int, float] = {}  # update_id -> when it became available
        self.webhook: dict[str, Any] | None = None
        self.commands: list[dict[str, str]] | None = None
        self.files: dict[str, tuple[str, bytes]] = {}  # file_id -> (file_path, content)
        self.failures: dict[str, deque[Failure]] = defaultdict(deque)
        self.reject_entities = 0  # refuse this many entity-bearing messages
        self.outage: Failure | None = None  # while set, every call fails with it
        self.refused: list[Call] = []  # calls answered with an error (scripted or outage)
        self.transcript = "transcribed words"
        # What a user sees: (chat id, message id) -> (text, entities), edits and deletions applied
        self.chat: dict[tuple[int, int], tuple[str, list[dict[str, Any]]]] = {}
        self.markup: dict[tuple[int, int], Any] = {}  # the bot's messages' inline keyboards
        self.files_shown: set[tuple[int, int]] = set()  # the bot's photos and documents
        self.user_messages: set[tuple[int, int]] = set()  # messages people wrote
        self.holds = Holds()
        # sendMessageDraft: off answers "method not found" (a Bot API server without it);
        # on, a private chat shows the last preview until the bot's next message arrives
        self.draft_previews = False
        self.previews: dict[int, tuple[int, str]] = {}  # chat id -> (draft id, text) shown
        self.replays: list[dict[str, Any]] = []  # confirmed updates to deliver once more
        self.changed = asyncio.Condition()
        self._update_ids = itertools.count(1000)
        self._own_ids = itertools.count(1)  # the bot's counter: private chats, basic groups
        self._channel_ids: dict[int, itertools.count[int]] = defaultdict(lambda: itertools.count(1))
        self._file_ids = itertools.count(1)
        self._handlers = {
            name[3:].lower(): getattr(self, name) for name in dir(self) if name.startswith("_m_")
        }
        self._runner: web.AppRunner | None = None
        self._closing = False
        self.port = 0

    # -- lifecycle ------------------------------------------------------------------------

    async def start(self) -> FakeTelegram:
        app = web.Application(client_max_size=50_000_000)
        app.router.add_route("*", "/bot{token}/{method}", self._api)
        app.router.add_get("/file/bot{token}/{path:.+}", self._download)
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        server: Any = site._server
        self.port = server.sockets[0].getsockname()[1]
        return self

    async def stop(self) -> None:
        self._closing = True
        self.holds.release_all()  # a held request must not keep the server from closing
        await self._notify()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- scripting ------------------------------------------------------------------------

    def fail(
        self,
        method: str,
        status: int,
        description: str = "fake failure",
        *,
        retry_after: int | None = None,
        times: int = 1,
        skip: int = 0,
        chat_id: int | None = None,
    ) -> None:
        """Answer the next ``times`` calls of ``method`` (after ``skip`` good ones) with an
        error; with ``chat_id``, only calls for that chat count."""
        self.failures[method].append(
            Failure(status, description, retry_after, times, skip, chat_id)
        )

    def hold(
        self,
        method: str,
        *,
        deliver: bool,
        chat_id: int | None = None,
        text: str | None = None,
        late: bool = False,
    ) -> Hold:
        """Hold the next call of ``method`` (for ``chat_id``, with a text starting with
        ``text``) open until :meth:`Hold.release` (tests/fakes/holds.py); ``late``: made
        only then."""

        def matches(params: dict[str, Any]) -> bool:
            said = params.get("text")
            return (
                params["_method"].lower() == method.lower()
                and (chat_id is None or str(params.get("chat_id")) == str(chat_id))
                and (text is None or (isinstance(said, str) and said.startswith(text)))
            )

        return self.holds.add(deliver=deliver, matches=matches, late=late)

    def next_message_id(self, chat_id: int) -> int:
        counter = self._own_ids if private_space(chat_id) else self._channel_ids[chat_id]
        return next(counter)

    async def go_down(self, status: int = 502, description: str = "Bad Gateway") -> None:
        """Answer every call with ``status`` until :meth:`come_back` (a long poll waiting
        now is answered with it too, as a proxy in front of a dead server would)."""
        self.outage = Failure(status, description)
        await self._notify()

    async def come_back(self) -> None:
        self.outage = None
        await self._notify()

    def add_file(self, content: bytes, file_path: str = "photos/file_1.jpg") -> str:
        file_id = f"FILE{next(self._file_ids)}"
        self.files[file_id] = (file_path, content)
        return file_id

    def next_update_id(self) -> int:
        return next(self._update_ids)

    async def push(self, update: dict[str, Any]) -> dict[str, Any]:
        """Make an update available to getUpdates (give it an id if it has none)."""
        update = dict(update)
        update.setdefault("update_id", self.next_update_id())
        self.pushed_at.setdefault(update["update_id"], time.perf_counter())
        async with self.changed:
            self.updates.append(update)
            self.changed.notify_all()
        return update

    async def redeliver(self, update: dict[str, Any]) -> None:
        """Deliver an update the bot already confirmed once more, with its own ``update_id``
        (Telegram does when it did not take in the confirmation): the next ``getUpdates``
        returns it whatever its offset."""
        async with self.changed:
            self.replays.append(dict(update))
            self.changed.notify_all()

    def message(
        self,
        text: str = "",
        *,
        chat_id: int = 42,
        user_id: int = 42,
        first_name: str = "Dana",
        username: str | None = None,
        chat_type: str = "private",
        thread_id: int | None = None,
        reply_to: dict[str, Any] | None = None,
        message_id: int | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        """A ``message`` object as Telegram builds it, entities for commands and @mentions included."""
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_type == "private":
            chat["first_name"] = first_name
        else:
            chat["title"] = f"Group {chat_id}"
            if thread_id is not None:
                chat["is_forum"] = True
        sender: dict[str, Any] = {"id": user_id, "is_bot": False, "first_name": first_name}
        if username:
            sender["username"] = username
        message_id = message_id or self.next_message_id(chat_id)
        self.user_messages.add((chat_id, message_id))
        msg: dict[str, Any] = {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": chat,
            "from": sender,
        }
        if text:
            msg["text"] = text
            if entities := auto_entities(text):
                msg["entities"] = entities
        if thread_id is not None:
            msg["message_thread_id"] = thread_id
            msg["is_topic_message"] = True
        if reply_to is not None:
            msg["reply_to_message"] = reply_to
        msg.update(extra)
        return msg

    async def say(self, text: str = "", **kwargs: Any) -> dict[str, Any]:
        """Push a message update; returns the update."""
        return await self.push({"message": self.message(text, **kwargs)})

    async def edit(self, update: dict[str, Any], text: str) -> dict[str, Any]:
        """The person edits the message of ``update`` (one :meth:`say` pushed): the
        ``edited_message`` update Telegram sends, same message id, new text."""
        message = {**update["message"], "text": text, "edit_date": int(time.time()) + 1}
        message.pop("entities", None)
        if entities := auto_entities(text):
            message["entities"] = entities
        return await self.push({"edited_message": message})

    async def press(
        self, sent: Call, data: str, *, user_id: int, first_name: str = "Dana"
    ) -> dict[str, Any]:
        """A tap by ``user_id`` on the button with ``data`` under the message ``sent`` (a
        ``sendMessage`` call of the bot): the ``callback_query`` update Telegram sends."""
        buttons = [b for row in sent.params["reply_markup"]["inline_keyboard"] for b in row]
        assert data in [b["callback_data"] for b in buttons], "no such button"
        message = {**sent.result, "reply_markup": sent.params["reply_markup"]}
        query = {
            "id": f"cb{self.next_update_id()}",
            "from": {"id": user_id, "is_bot": False, "first_name": first_name},
            "message": message,
            "chat_instance": f"ci{message['chat']['id']}",
            "data": data,
        }
        return await self.push({"callback_query": query})

    def bot_message(
        self, chat_id: int, message_id: int, text: str = "earlier answer"
    ) -> dict[str, Any]:
        """A message the bot itself sent (to reply to)."""
        return {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "supergroup", "title": "g"},
            "from": self._me(),
            "text": text,
        }

    # -- reading what happened ------------------------------------------------------------

    def called(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def sent(self, chat_id: int | None = None) -> list[Call]:
        """Messages the bot delivered (text, photos, documents, voice), in order."""
        return [
            c
            for c in self.calls
            if c.method in ("sendMessage", "sendPhoto", "sendDocument", "sendVoice")
            and c.params.get("_ok")
            and (chat_id is None or int(c.params["chat_id"]) == chat_id)
        ]

    def texts(self, chat_id: int | None = None) -> list[str]:
        return [c.params.get("text", "") for c in self.sent(chat_id) if "text" in c.params]

    def visible(self, chat_id: int) -> list[str]:
        """The texts of the chat's messages as the user sees them now, oldest first."""
        return [text for (chat, _), (text, _) in sorted(self.chat.items()) if chat == chat_id]

    def visible_entities(self, chat_id: int) -> list[list[dict[str, Any]]]:
        return [ents for (chat, _), (_, ents) in sorted(self.chat.items()) if chat == chat_id]

    def formatted(self, chat_id: int) -> list[tuple[str, list[tuple[str, str]]]]:
        """The chat's messages as the user sees them now: each text with what its entities
        format, as (entity type, the text it covers), in order."""
        return [
            (text, [(e["type"], utf16_slice(text, e["offset"], e["length"])) for e in entities])
            for (chat, _), (text, entities) in sorted(self.chat.items())
            if chat == chat_id
        ]

    async def wait_for(self, predicate: Any, timeout: float = 10.0) -> None:
        async def reached() -> None:
            async with self.changed:
                await self.changed.wait_for(predicate)

        await asyncio.wait_for(reached(), timeout)

    async def wait_sent(
        self, count: int, chat_id: int | None = None, timeout: float = 10.0
    ) -> list[Call]:
        await self.wait_for(lambda: len(self.sent(chat_id)) >= count, timeout)
        return self.sent(chat_id)

    async def wait_called(self, method: str, count: int = 1, timeout: float = 10.0) -> list[Call]:
        await self.wait_for(lambda: len(self.called(method)) >= count, timeout)
        return self.called(method)

    async def wait_confirmed(self, offset: int, timeout: float = 10.0) -> None:
        await self.wait_for(lambda: self.confirmed_offset >= offset, timeout)

    # -- the API --------------------------------------------------------------------------

    async def _notify(self) -> None:
        async with self.changed:
            self.changed.notify_all()

    async def _api(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return _error(401, "Unauthorized")
        method = request.match_info["method"]
        params, files = await _params(request)
        call = Call(method, params, files=files)
        async with self.changed:
            self.calls.append(call)
            self.changed.notify_all()
        if self.outage is not None:
            return await self._refuse(call, self.outage)
        queued = self.failures.get(method)  # scripted by the exact method name
        failure = next((f for f in queued or () if f.applies(params)), None)
        if queued and failure is not None and failure.skip > 0:
            failure.skip -= 1
        elif queued and failure is not None:
            failure.times -= 1
            if failure.times <= 0:
                queued.remove(failure)
            return await self._refuse(call, failure)
        handler = self._handlers.get(method.lower())  # Bot API methods are case-insensitive
        if handler is None:
            return _error(404, "Not Found: method not found")
        held = self.holds.take({**params, "_method": method})
        if held is not None:
            return await self._held(held, call, handler)
        response: web.Response = await handler(call)
        outage = self._outage()  # it may have gone down while this poll waited
        if outage is not None and method == "getUpdates":
            return await self._refuse(call, outage)
        if response.status == 200:
            params["_ok"] = True
            call.result = json.loads(response.text or "{}").get("result")
            await self._notify()
        return response

    async def _held(self, held: Hold, call: Call, handler: Any) -> web.Response:
        async def make() -> web.Response:
            response: web.Response = await handler(call)
            if response.status == 200:
                call.params["_ok"] = True
                call.result = json.loads(response.text or "{}").get("result")
            await self._notify()
            return response

        return await Holds.serve(held, make, lambda: _error(502, "held, never made"))

    def _outage(self) -> Failure | None:
        return self.outage

    async def _refuse(self, call: Call, failure: Failure) -> web.Response:
        async with self.changed:
            self.refused.append(call)
            self.changed.notify_all()
        return _error(failure.status, failure.description, failure.retry_after)

    def _me(self) -> dict[str, Any]:
        return {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": "Switchboard",
            "username": self.username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }

    async def _m_getMe(self, call: Call) -> web.Response:
        return _ok(self._me())

    async def _m_getUpdates(self, call: Call) -> web.Response:
        if self.webhook is not None:
            return _error(409, "Conflict: can't use getUpdates method while webhook is active")
        offset = int(call.params.get("offset") or 0)
        timeout = float(call.params.get("timeout") or 0)
        limit = int(call.params.get("limit") or 100)
        async with self.changed:
            if offset:
                self.confirmed_offset = max(self.confirmed_offset, offset)
                while self.updates and self.updates[0]["update_id"] < offset:
                    self.updates.popleft()
            self.changed.notify_all()

            def ready() -> bool:
                if self._closing or self.outage is not None or self.replays:
                    return True
                return any(u["update_id"] >= offset for u in self.updates)

            if not ready() and timeout > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.changed.wait_for(ready), timeout)
            batch = [u for u in self.updates if u["update_id"] >= offset][:limit]
            if self.replays and self.outage is None:  # before the new ones
                again, self.replays = self.replays[:limit], self.replays[limit:]
                batch = [*again, *batch][:limit]
        return _ok(batch)

    async def _m_deleteWebhook(self, call: Call) -> web.Response:
        self.webhook = None
        return _ok(True)

    async def _m_setWebhook(self, call: Call) -> web.Response:
        self.webhook = dict(call.params)
        return _ok(True)

    async def _m_setMyCommands(self, call: Call) -> web.Response:
        self.commands = call.params.get("commands")
        return _ok(True)

    async def _m_sendChatAction(self, call: Call) -> web.Response:
        return _ok(True)

    async def _m_answerCallbackQuery(self, call: Call) -> web.Response:
        return _ok(True)

    async def _m_editMessageReplyMarkup(self, call: Call) -> web.Response:
        if not call.params.get("chat_id") or not call.params.get("message_id"):
            return _error(400, "Bad Request: message identifier is not specified")
        key = (int(call.params["chat_id"]), int(call.params["message_id"]))
        refused = self._uneditable(key)
        if refused is not None:
            return refused
        markup = call.params.get("reply_markup") or None
        if markup == {"inline_keyboard": []}:
            markup = None
        if self.markup.get(key) == markup:
            return _not_modified()
        if markup is None:
            self.markup.pop(key, None)
        else:
            self.markup[key] = markup
        return _ok(self._edited(key))

    def _uneditable(self, key: tuple[int, int]) -> web.Response | None:
        """Telegram's refusal of an edit of ``key``, if it refuses."""
        if key in self.user_messages:
            return _error(400, "Bad Request: message can't be edited")
        if key not in self.chat:
            return _error(400, "Bad Request: message to edit not found")
        return None

    def _edited(self, key: tuple[int, int]) -> dict[str, Any]:
        kind = "private" if key[0] > 0 else "supergroup"
        return {
            "message_id": key[1],
            "date": int(time.time()),
            "edit_date": int(time.time()),
            "chat": {"id": key[0], "type": kind},
            "from": self._me(),
            "text": self.chat[key][0],
        }

    async def _m_getFile(self, call: Call) -> web.Response:
        file_id = call.params.get("file_id")
        if file_id not in self.files:
            return _error(400, "Bad Request: invalid file_id")
        path, content = self.files[file_id]
        return _ok(
            {
                "file_id": file_id,
                "file_unique_id": f"U{file_id}",
                "file_size": len(content),
                "file_path": path,
            }
        )

    async def _m_sendMessage(self, call: Call) -> web.Response:
        text = call.params.get("text")
        if not isinstance(text, str) or not text.strip():
            return _error(400, "Bad Request: message text is empty")
        if utf16_len(text) > 4096:
            return _error(400, "Bad Request: message is too long")
        entities = call.params.get("entities") or []
        for entity in entities:
            if entity["offset"] < 0 or entity["offset"] + entity["length"] > utf16_len(text):
                return _error(
                    400, "Bad Request: can't parse entities: entity beyond the end of the text"
                )
        if entities and self.reject_entities > 0:
            self.reject_entities -= 1
            return _error(
                400,
                "Bad Request: can't parse entities: Can't find end of the entity starting at byte offset 12",
            )
        self.previews.pop(int(call.params["chat_id"]), None)  # the message replaces it
        return _ok(self._sent_message(call, text=text))

    async def _m_sendMessageDraft(self, call: Call) -> web.Response:
        if not self.draft_previews:
            return _error(404, "Not Found: method not found")
        chat_id, draft_id = int(call.params["chat_id"]), int(call.params.get("draft_id", 0))
        text = call.params.get("text")
        if chat_id < 0:
            return _error(400, "Bad Request: TEXTDRAFT_PEER_INVALID")
        if draft_id == 0:
            return _error(400, "Bad Request: draft_id must be non-zero")
        if not isinstance(text, str) or not 0 < utf16_len(text) <= 4096:
            return _error(400, "Bad Request: text must be 1-4096 characters")
        self.previews[chat_id] = (draft_id, text)
        return _ok(True)

    async def _m_editMessageText(self, call: Call) -> web.Response:
        key = (int(call.params["chat_id"]), int(call.params["message_id"]))
        text = call.params.get("text")
        if not isinstance(text, str) or not text.strip():
            return _error(400, "Bad Request: message text is empty")
        if utf16_len(text) > 4096:
            return _error(400, "Bad Request: MESSAGE_TOO_LONG")
        refused = self._uneditable(key)
        if refused is not None:
            return refused
        if key in self.files_shown:
            return _error(400, "Bad Request: there is no text in the message to edit")
        entities = call.params.get("entities") or []
        markup = call.params.get("reply_markup") or None
        if self.chat[key] == (text, entities) and self.markup.get(key) == markup:
            return _not_modified()
        self.chat[key] = (text, entities)
        if markup is None:  # an edit without buttons removes them, as Telegram's does
            self.markup.pop(key, None)
        else:
            self.markup[key] = markup
        return _ok(self._edited(key))

    async def _m_deleteMessage(self, call: Call) -> web.Response:
        key = (int(call.params["chat_id"]), int(call.params["message_id"]))
        if self.chat.pop(key, None) is None:
            return _error(400, "Bad Request: message to delete not found")
        self.markup.pop(key, None)
        self.files_shown.discard(key)
        return _ok(True)

    def made_unheard(self, chat_id: int, text: str) -> int:
        """A message the bot sent that Telegram made while its sender died: in the chat,
        numbered as Telegram numbers it, its answer never heard."""
        message_id = self.next_message_id(chat_id)
        self.chat[(chat_id, message_id)] = (text, [])
        return message_id

    async def delete_by_user(self, chat_id: int, message_id: int) -> None:
        """The person deletes one of the bot's messages in a private chat."""
        self.chat.pop((chat_id, message_id), None)
        await self._notify()

    async def _m_sendPhoto(self, call: Call) -> web.Response:
        return _ok(
            self._sent_message(
                call, photo=[{"file_id": "P", "file_unique_id": "P", "width": 1, "height": 1}]
            )
        )

    async def _m_sendDocument(self, call: Call) -> web.Response:
        return _ok(self._sent_message(call, document={"file_id": "D", "file_unique_id": "D"}))

    async def _m_sendVoice(self, call: Call) -> web.Response:
        voice = {"file_id": "V", "file_unique_id": "V", "duration": 1}
        return _ok(self._sent_message(call, voice=voice))

    def _sent_message(self, call: Call, **content: Any) -> dict[str, Any]:
        chat_id = int(call.params["chat_id"])
        kind = "private" if chat_id > 0 else "supergroup"
        message_id = self.next_message_id(chat_id)
        shown = content.get("text") or next(
            (f"[{kind}]" for kind in ("photo", "voice") if kind in content), "[document]"
        )
        key = (chat_id, message_id)
        self.chat[key] = (shown, call.params.get("entities") or [])
        if "text" not in content:
            self.files_shown.add(key)
        if call.params.get("reply_markup"):
            self.markup[key] = call.params["reply_markup"]
        return {
            "message_id": message_id,
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": kind},
            "from": self._me(),
            **content,
        }

    async def _download(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return web.Response(status=401)
        for path, content in self.files.values():
            if path == request.match_info["path"]:
                return web.Response(body=content)
        return web.Response(status=404)

    async def _transcribe(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload: Any = form.get("file")
        size = len(upload.file.read()) if upload is not None else 0
        self.calls.append(Call("transcribe", {"model": form.get("model"), "size": size}))
        return web.json_response({"text": self.transcript})


def auto_entities(text: str) -> list[dict[str, Any]]:
    """The ``bot_command`` and ``mention`` entities Telegram adds to a text."""
    entities = []
    offset = 0
    for word in text.split(" "):
        if word.startswith("/") and offset == 0 and len(word) > 1:
            entities.append({"type": "bot_command", "offset": 0, "length": utf16_len(word)})
        elif word.startswith("@") and len(word) > 1:
            entities.append({"type": "mention", "offset": offset, "length": utf16_len(word)})
        offset += utf16_len(word) + 1
    return entities


async def _params(request: web.Request) -> tuple[dict[str, Any], dict[str, bytes]]:
    """Telegram's request encodings: form fields whose non-string values are JSON."""
    params: dict[str, Any] = {}
    files: dict[str, bytes] = {}
    if request.content_type == "application/json":
        body = await request.json() if request.can_read_body else {}
        return dict(body), files
    if request.content_type.startswith("multipart/"):
        reader = await request.multipart()
        async for part in reader:
            if part.filename is not None:  # type: ignore[union-attr]
                files[part.name or "file"] = await part.read()  # type: ignore[union-attr]
                params[part.name or "file"] = part.filename  # type: ignore[union-attr]
            else:
                params[part.name or ""] = _decode(await part.text(), part.name or "")  # type: ignore[union-attr]
        return params, files
    form = await request.post()
    for key, value in form.items():
        params[key] = _decode(str(value), key)
    params.update({k: _decode(v, k) for k, v in request.query.items()})
    return params, files


_STRINGS = {
    "text",
    "caption",
    "file_id",
    "url",
    "secret_token",
    "filename",
    "action",
    "callback_query_id",
}


def _decode(value: str, key: str = "") -> Any:
    if key in _STRINGS:  # sent raw by PTB even when they look like JSON ("42", "true")
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value


def _not_modified() -> web.Response:
    return _error(
        400,
        "Bad Request: message is not modified: specified new message content and reply "
        "markup are exactly the same as a current content and reply markup of the message",
    )


def _ok(result: Any) -> web.Response:
    return web.json_response({"ok": True, "result": result})


def _error(status: int, description: str, retry_after: int | None = None) -> web.Response:
    body: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
    if retry_after is not None:
        body["parameters"] = {"retry_after": retry_after}
    return web.json_response(body, status=status)


def random_token() -> str:
    """A token unique to one test: the per-token lock is shared by every test process."""
    import secrets

    return f"{secrets.randbelow(10**9) + 10**8}:TEST-{secrets.token_hex(8)}"


def section(fake: FakeTelegram, **overrides: Any) -> dict[str, Any]:
    """``telegram`` settings pointing at ``fake``; user 42 may talk by default."""
    values: dict[str, Any] = {
        "token": fake.token,
        "base_url": fake.base_url,
        "poll_timeout_seconds": 5,
        "allow_from": ["42"],
        "streaming": False,  # tests of streamed answers turn it on (tests/test_streaming.py)
    }
    values.update(overrides)
    return values
