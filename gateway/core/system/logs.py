"""Logging in one place, with secret redaction on by default.

Every configured secret value, plus anything shaped like a well-known token (model API keys,
bearer tokens, and the shapes each channel names for its platform's credentials), is replaced
by ``[REDACTED]`` in the final formatted line (message, arguments and tracebacks alike).
The log file is created with mode 0600. Lines are text, or one JSON object each
(``logging.format = "json"``) for log collectors. The latest warning or error is kept
in memory (:func:`last_problem`) so ``switchboard status`` can show it.
"""

from __future__ import annotations

import contextlib
import json
import logging
import logging.handlers
import os
import re
import sys
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, SecretStr

TOKEN_PATTERNS = (
    r"sk-(?:ant-)?[A-Za-z0-9_\-]{16,}",  # OpenAI / Anthropic keys
    r"(?i:(?<=bearer )[A-Za-z0-9._\-]{12,})",
)
_KEY_NAMES = re.compile(r"(?i)(api[_-]?key|token|secret|password|passwd)")
REDACTED = "[REDACTED]"


def secret_values(settings: BaseModel, environ: dict[str, str] | None = None) -> set[str]:
    """Every secret the process knows: SecretStr fields and secret-named env vars."""
    found = {s for s in _walk(settings) if len(s) >= 6}
    env = dict(os.environ) if environ is None else environ
    for key, value in env.items():
        if _KEY_NAMES.search(key) and len(value) >= 6:
            found.add(value)
    return found


def _walk(model: BaseModel) -> Iterator[str]:
    for name in type(model).model_fields:
        yield from _secrets_in(getattr(model, name))


def _secrets_in(value: Any) -> Iterator[str]:
    """Secrets anywhere in a value: nested sections, and tables of them (``[agents.x]``,
    an MCP server's ``env`` and ``headers``)."""
    if isinstance(value, SecretStr):
        yield value.get_secret_value()
    elif isinstance(value, BaseModel):
        yield from _walk(value)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _secrets_in(item)
    elif isinstance(value, tuple | list):
        for item in value:
            yield from _secrets_in(item)


class Redactor:
    """``secrets``: the values to hide; ``patterns``: more token shapes (regular expressions)
    to hide besides :data:`TOKEN_PATTERNS`, whoever's they are."""

    def __init__(self, secrets: Iterable[str] = (), *, patterns: Iterable[str] = ()) -> None:
        literal = sorted({s for s in secrets if s}, key=len, reverse=True)
        parts = [re.escape(s) for s in literal] + [*TOKEN_PATTERNS, *patterns]
        self._pattern = re.compile("|".join(parts))

    def __call__(self, text: str) -> str:
        return self._pattern.sub(REDACTED, text)


class RedactingFormatter(logging.Formatter):
    def __init__(self, fmt: str, redactor: Redactor) -> None:
        super().__init__(fmt)
        self._redact = redactor

    def format(self, record: logging.LogRecord) -> str:
        return self._redact(super().format(record))


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``time`` (ISO 8601), ``level``, ``logger``, ``message`` and,
    for exceptions, ``exception``; every text field redacted."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self._redact = redactor

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(record.created))
            + f".{int(record.msecs):03d}"
            + time.strftime("%z", time.localtime(record.created)),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": self._redact(record.getMessage()),
        }
        if record.exc_info:
            entry["exception"] = self._redact(self.formatException(record.exc_info))
        return json.dumps(entry, ensure_ascii=False)


class LogFile(logging.handlers.RotatingFileHandler):
    """The log file (rotated at 5 MB, three kept). One it cannot write (its disk is full) is
    said once on the standard error, and once more when it can write again; logging's own
    handling printed a traceback for every line in between, on the disk-full outage a
    gateway is busiest logging about. The console (a service's journal) keeps every line."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, maxBytes=5_000_000, backupCount=3, encoding="utf-8")
        self._failing = False  # the last line could not be written
        self._failed = False  # ... nor the one being written now

    def emit(self, record: logging.LogRecord) -> None:
        self._failed = False
        super().emit(record)
        if self._failing and not self._failed:
            self._failing = False
            self._say(f"writing the log file {self.baseFilename} again")

    def handleError(self, record: logging.LogRecord) -> None:
        self._failed = True
        if self._failing:
            return
        self._failing = True
        error = sys.exc_info()[1]
        reason = error.strerror if isinstance(error, OSError) and error.strerror else error
        self._say(
            f"cannot write the log file {self.baseFilename} ({reason}); its lines are lost "
            "until it can be written again"
        )

    @staticmethod
    def _say(line: str) -> None:
        with contextlib.suppress(OSError, ValueError):  # no standard error either
            sys.stderr.write(f"switchboard: {line}\n")
            sys.stderr.flush()


@dataclass(frozen=True, slots=True)
class Problem:
    """The latest warning or error this process logged."""

    at: float  # epoch seconds
    level: str
    logger: str
    message: str


class _LastProblem(logging.Handler):
    def __init__(self, redactor: Redactor) -> None:
        super().__init__(logging.WARNING)
        self._redact = redactor
        self.latest: Problem | None = None

    def emit(self, record: logging.LogRecord) -> None:
        message = self._redact(record.getMessage())
        self.latest = Problem(record.created, record.levelname.lower(), record.name, message)


_last = _LastProblem(Redactor())


def last_problem() -> Problem | None:
    """The latest warning or error logged since :func:`configure_logging` (None: none)."""
    return _last.latest


def configure_logging(
    *,
    level: str,
    redactor: Redactor,
    log_file: Path | None = None,
    console: bool = True,
    fmt: Literal["text", "json"] = "text",
    file_level: str | None = None,
    quiet: Iterable[str] = (),
) -> None:
    """Logging for the process: the console at ``level``, the log file at ``file_level``
    (default: the same). ``switchboard chat -v`` debugs on its console only: the file is
    the gateway's, shared with ``switchboard run``. ``quiet``: more chatty libraries' loggers
    (the channels' SDKs), kept at warning and above like the HTTP clients'."""
    global _last  # noqa: PLW0603 - logging is process-wide; so is its latest problem
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    formatter: logging.Formatter = (
        JsonFormatter(redactor)
        if fmt == "json"
        else RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s", redactor)
    )
    _last = _LastProblem(redactor)
    root.addHandler(_last)
    if console:
        stream = logging.StreamHandler()
        stream.setFormatter(formatter)
        root.addHandler(stream)
    if log_file is not None:
        log_file.parent.mkdir(parents=True, exist_ok=True)
        log_file.touch(mode=0o600, exist_ok=True)
        log_file.chmod(0o600)
        writing = LogFile(log_file)
        writing.setFormatter(formatter)
        if file_level is not None:
            writing.setLevel(file_level.upper())
        root.addHandler(writing)
    levels = [logging.getLevelName(name.upper()) for name in (level, file_level or level)]
    root.setLevel(min(levels))
    for noisy in ("httpx", "httpcore", "httpx2", *quiet):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
