"""An answer as IRC lines: plain text, one protocol line per piece that fits.

IRC shows text as sent, so the markdown stays readable as it is, except code fences
(their ```` ``` ```` lines are left out, the code kept). Each line of the answer becomes
one or more ``PRIVMSG`` lines cut to the byte budget the server leaves after our prefix
(:func:`channels.irc.protocol.text_budget`); empty lines are left out (IRC cannot send
them).
"""

from __future__ import annotations

from channels.irc.protocol import cut, format_line, text_budget


def lines(text: str, target: str, source: str) -> list[str]:
    """The protocol lines that send ``text`` to ``target`` from ``source`` (our mask)."""
    budget = text_budget("PRIVMSG", target, source)
    out: list[str] = []
    for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
        if line.lstrip().startswith("```"):
            continue
        clean = line.replace("\0", "").replace("\t", "    ").rstrip()
        out.extend(format_line("PRIVMSG", target, p) for p in cut(clean, budget) if p.strip())
    return out
