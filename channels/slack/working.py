"""What shows on Slack that the bot works on a message: a reaction on it (👀), swapped for
a mark once the answer is out (✅, or ❌ for a failure notice). Slack has no typing
indicator for bots, and a mention in a channel would otherwise look ignored until the
answer arrives.

Needs the ``reactions:write`` scope; without it the first refusal is logged once, naming
the scope, and no more reactions are tried. The messages being worked on are remembered in
memory: after a restart, a 👀 from before stays (the answer still arrives).
"""

from __future__ import annotations

import logging

from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from gateway.core.messages import OutboundKind, OutboundMessage

log = logging.getLogger(__name__)

WORKING, DONE, FAILED = "eyes", "white_check_mark", "x"
_HARMLESS = {"already_reacted", "no_reaction", "message_not_found"}


class WorkingMarks:
    def __init__(self, client: AsyncWebClient, *, enabled: bool) -> None:
        self._client = client
        self._enabled = enabled
        self._working: dict[str, list[tuple[str, str]]] = {}  # session -> (channel, ts)

    async def started(self, session_key: str, channel: str, ts: str) -> None:
        """A message was accepted for a turn: mark it as being worked on."""
        if not self._enabled:
            return
        marked = self._working.setdefault(session_key, [])
        if (channel, ts) not in marked and await self._react("reactions.add", channel, ts, WORKING):
            marked.append((channel, ts))

    async def answered(self, message: OutboundMessage) -> None:
        """The answer (or a failure notice) for the session went out: swap the marks."""
        if message.kind not in (OutboundKind.REPLY, OutboundKind.NOTICE):
            return
        mark = FAILED if message.kind is OutboundKind.NOTICE else DONE
        for channel, ts in self._working.pop(message.chat.session_key, []):
            await self._react("reactions.remove", channel, ts, WORKING)
            await self._react("reactions.add", channel, ts, mark)

    async def _react(self, method: str, channel: str, ts: str, name: str) -> bool:
        if not self._enabled:
            return False
        try:
            await self._client.api_call(
                method, json={"channel": channel, "timestamp": ts, "name": name}
            )
        except SlackApiError as exc:
            error = str(exc.response.get("error", ""))
            if error in _HARMLESS:
                return True
            if error in ("missing_scope", "not_allowed_token_type"):
                log.warning(
                    "slack: cannot react to show work (%s): add the reactions:write scope", error
                )
                self._enabled = False
            else:
                log.info("slack: %s %s failed: %s", method, name, error)
            return False
        except Exception as exc:  # cosmetic: never fails a message or an answer
            log.info("slack: %s %s failed: %s", method, name, exc)
            return False
        return True
