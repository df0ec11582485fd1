"""Why a model call was made: every call is recorded with its purpose."""

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
