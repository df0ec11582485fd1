"""Pure conversion of an IRC ``PRIVMSG`` into an :class:`InboundMessage` (no I/O).

* IRC has no immutable ids: ``sender_id`` is the sender's ``nick!user@host`` as the server
  shows it, which ``allow_from`` masks match (settings.py). A private conversation's
  ``chat_id`` is that same mask, so someone who takes the nick later (another user, another
  host) does not continue it; answers go to its nick. A channel's ``chat_id`` is its name
  as the server compares names (``#switchboard``).
* In a channel the bot is addressed by its nick: ``switchboard: hi``, ``switchboard, hi``,
  or the nick as a word anywhere in the line; ``nick:`` at the start is taken off the text.
* ``NOTICE`` is never answered (what bots and services send), nor CTCP requests other
  than ``ACTION`` (``/me waves`` is ``* dana waves``); colours and bold codes are dropped.
* ``platform_message_id`` is the server's ``msgid`` tag where it gives one, else a new id:
  a line arrives once over the connection, and IRC redelivers nothing.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime

from channels.irc.protocol import Line, casefold, is_channel, without_formatting
from gateway.core.messages import ChatType, InboundMessage

CHANNEL = "irc"


@dataclass(frozen=True, slots=True)
class Names:
    """The nicks the bot answers to: the one it has now and the one configured."""

    current: str
    configured: str

    def __contains__(self, nick: object) -> bool:
        return isinstance(nick, str) and casefold(nick) in (
            casefold(self.current),
            casefold(self.configured),
        )


def convert(line: Line, bot: Names) -> InboundMessage | None:
    """The inbound message for a ``PRIVMSG``, or None when it is nothing to answer."""
    if line.command != "PRIVMSG" or len(line.params) < 2 or "!" not in line.source:
        return None
    if line.nick in bot:
        return None  # our own line, echoed
    target, text = line.params[0], line.params[-1]
    if text.startswith("\x01"):
        verb, _, rest = text.strip("\x01").partition(" ")
        if verb.upper() != "ACTION":
            return None
        text = f"* {line.nick} {rest}"
    text = without_formatting(text).strip()
    if not text:
        return None
    group = is_channel(target)
    mentioned = not group or _addressed(text, bot)
    if group:
        text = _without_address(text, bot)
    return InboundMessage(
        channel=CHANNEL,
        chat_id=casefold(target) if group else line.source,
        sender_id=line.source,
        sender_name=line.nick,
        text=text,
        platform_message_id=line.tags.get("msgid") or uuid.uuid4().hex,
        chat_type=ChatType.GROUP if group else ChatType.DM,
        mentioned=mentioned,
        received_at=_time(line.tags.get("time")),
        chat_name=target if group else "",
    )


def _addressed(text: str, bot: Names) -> bool:
    for nick in (bot.current, bot.configured):
        if re.search(
            rf"(?<![\w\[\]\\`^{{|}}-]){re.escape(nick)}(?![\w\[\]\\`^{{|}}-])", text, re.I
        ):
            return True
    return False


def _without_address(text: str, bot: Names) -> str:
    """``switchboard: what's up`` → ``what's up``, ``@switchboard /stop`` and
    ``switchboard /stop`` → ``/stop`` (only at the start), so a command written after the
    nick is a command. A bare nick before other words stays: ``switchboard is slow``."""
    head, sep, rest = text.partition(" ")
    if not sep or head.removeprefix("@").rstrip(":,") not in bot:
        return text
    if head.startswith("@") or head[-1:] in (":", ",") or rest.lstrip().startswith("/"):
        return rest.strip() or text
    return text


def _time(value: str | None) -> datetime:
    """The server's ``time`` tag (IRCv3 server-time), or now."""
    if value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            pass
    return datetime.now(UTC)
