"""Why a model call was made (every call is recorded with its purpose), and money as people
read it."""

from __future__ import annotations

import enum


class Purpose(enum.StrEnum):
    """Why a model call was made (the ``usage.purpose`` column)."""

    TURN = "turn"  # the turn itself: answers and tool steps
    REVIEW = "review"  # the LLM reviewer of an answer
    PAGE = "page"  # condensing a long web page for web_fetch
    SUMMARY = "summary"  # summarizing a long conversation
    REFLECTION = "reflection"  # updating memory after a turn
    IMAGE = "image"  # a picture made by the images endpoint (generate_image)


def usd(amount: float) -> str:
    """Dollars as people read them: in cents, or to four places where cents would hide
    what was spent ($0.0147 against a cap of $0.01, not "$0.01 of $0.01")."""
    if amount >= 100 or abs(amount - round(amount, 2)) < 5e-5:
        return f"${amount:,.2f}"
    return f"${amount:.4f}"
