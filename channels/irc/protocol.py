"""The IRC protocol's text, pure (no I/O): lines parsed and written (RFC 1459/2812 with
IRCv3 message tags), nicks and channels compared as servers compare them, ``nick!user@host``
masks matched, and long text cut into lines that fit the 512-byte limit.

**The line limit.** A line is at most 512 bytes *as the server relays it*, CR LF included:
the server puts our prefix (``:nick!user@host ``) in front of ``PRIVMSG <target> :<text>``,
so what is left for the text is 512 - 2 - that prefix - the command. Our own user and host
are taken from what the server shows of us (the echo of our JOIN); until then the longest
the server may make them is assumed (a user of 10 characters with ``~``, a host of 63).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

LINE_LIMIT = 512  # bytes, CR LF included (RFC 1459)
WORST_USER, WORST_HOST = 11, 63  # "~" + USERLEN 10; a host name's longest label run
_FORMATTING = re.compile(r"\x03(\d{1,2}(,\d{1,2})?)?|[\x02\x0f\x11\x16\x1d\x1e\x1f]")
_TAG_ESCAPES = {":": ";", "s": " ", "\\": "\\", "r": "\r", "n": "\n"}


@dataclass(frozen=True, slots=True)
class Line:
    """One protocol line: ``@tags :source COMMAND params... :trailing``."""

    command: str
    params: tuple[str, ...] = ()
    source: str = ""  # nick!user@host, or a server's name
    tags: dict[str, str] = field(default_factory=dict)

    @property
    def nick(self) -> str:
        return self.source.split("!", 1)[0]


def parse(raw: str) -> Line | None:
    """A line as received (without CR LF); None for an empty or broken one."""
    rest = raw.rstrip("\r\n")
    tags: dict[str, str] = {}
    if rest.startswith("@"):
        tag_text, _, rest = rest[1:].partition(" ")
        for item in tag_text.split(";"):
            key, _, value = item.partition("=")
            tags[key] = _unescape(value)
    rest = rest.lstrip(" ")
    source = ""
    if rest.startswith(":"):
        source, _, rest = rest[1:].partition(" ")
    trailing = None
    if " :" in rest:
        rest, _, trailing = rest.partition(" :")
    elif rest.startswith(":"):
        rest, trailing = "", rest[1:]
    words = rest.split()
    if not words:
        return None
    params = tuple(words[1:]) + ((trailing,) if trailing is not None else ())
    return Line(words[0].upper(), params, source, tags)


def format_line(command: str, *params: str) -> str:
    """A line to send (without CR LF); the last parameter goes as trailing where it must
    (empty, with a space, or starting with ``:``)."""
    for param in params:
        if "\r" in param or "\n" in param or "\0" in param:
            raise ValueError("an IRC parameter cannot hold CR, LF or NUL")
    if not params:
        return command
    *middle, last = params
    if not last or " " in last or last.startswith(":"):
        last = f":{last}"
    return " ".join((command, *middle, last))


def _unescape(value: str) -> str:
    out, index = [], 0
    while index < len(value):
        char = value[index]
        if char == "\\" and index + 1 < len(value):
            out.append(_TAG_ESCAPES.get(value[index + 1], value[index + 1]))
            index += 2
            continue
        if char != "\\":
            out.append(char)
        index += 1
    return "".join(out)


def casefold(name: str) -> str:
    """A nick or channel as RFC 1459 compares them: ``[]\\~`` are the upper case of ``{}|^``."""
    return name.lower().translate(str.maketrans("[]\\~", "{}|^"))


def is_channel(name: str) -> bool:
    return name[:1] in ("#", "&", "+", "!")


def without_formatting(text: str) -> str:
    """Text without mIRC colours and bold/italic/underline codes."""
    return _FORMATTING.sub("", text)


def mask_matches(mask: str, source: str) -> bool:
    """Whether ``source`` (``nick!user@host``) matches ``mask``: a nick alone, or a
    ``nick!user@host`` mask where ``*`` is any run of characters and ``?`` any one."""
    if "!" not in mask and "@" not in mask:
        return casefold(mask) == casefold(source.split("!", 1)[0])
    pattern = "".join(
        ".*" if char == "*" else "." if char == "?" else re.escape(char) for char in casefold(mask)
    )
    return re.fullmatch(pattern, casefold(source), re.DOTALL) is not None


def text_budget(command: str, target: str, source: str) -> int:
    """Bytes left for the text of ``COMMAND target :text`` as the server relays it."""
    nick, _, rest = source.partition("!")
    user, _, host = rest.partition("@")
    prefix_length = 1 + len(nick.encode()) + 1 + 1 + 1  # ":" nick "!" "@" " "
    prefix_length += len(user.encode()) if user else WORST_USER
    prefix_length += len(host.encode()) if host else WORST_HOST
    overhead = len(f"{command} {target} :".encode()) + 2  # CR LF
    return LINE_LIMIT - prefix_length - overhead


def cut(text: str, budget: int) -> list[str]:
    """``text`` (one line, no CR LF) in pieces of at most ``budget`` UTF-8 bytes, cut at a
    space where one is near the end, never inside a character."""
    pieces = []
    rest = text
    while len(rest.encode()) > budget:
        end = len(rest.encode()[:budget].decode("utf-8", "ignore"))
        space = rest.rfind(" ", 0, end + 1)
        if space > end // 2:
            pieces.append(rest[:space])
            rest = rest[space + 1 :]
        else:
            pieces.append(rest[:end])
            rest = rest[end:]
    if rest:
        pieces.append(rest)
    return pieces
