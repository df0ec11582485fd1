"""Logging in one place, with secret redaction on by default.

Every configured secret value, plus anything shaped like a well-known token (model API keys,
bearer tokens, the user name and password in a URL such as ``http://user:secret@host``, and
the shapes each channel names for its platform's credentials), is replaced by
``[REDACTED]`` in the final formatted line (message, arguments and tracebacks alike).
The log file and every rotated one are created with mode 0600, in a 0700 folder. Lines are
text, or one JSON object each (``logging.format = "json"``) for log collectors. The latest
warning or error is kept in memory (:func:`last_problem`) so ``switchboard status`` can
show it.

A flood of one message (a client sending the same bad request ten thousand times, an
outage logging the same error each second) would rotate the whole history away: the log
keeps 3 x 5 MB. So each handler lets :data:`REPEATS_KEPT` identical records through per
:data:`REPEAT_WINDOW` seconds and counts the rest (:class:`RepeatLimit`); one line then
says how many were left out. Identical: the same logger, level, message and exception type.
"""

from __future__ import annotations

import contextlib
import json
import logging
import logging.handlers
import os
import re
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, SecretStr

from gateway.core.system.fileutil import private_folders

TOKEN_PATTERNS = (
    r"sk-(?:ant-)?[A-Za-z0-9_\-]{16,}",  # OpenAI / Anthropic keys
    r"(?i:(?<=bearer )[A-Za-z0-9._\-]{12,})",
    r"(?<=://)[^\s/@:]+:[^\s/@]+(?=@)",  # a URL's user name and password
)
_KEY_NAMES = re.compile(r"(?i)(api[_-]?key|token|secret|password|passwd)")
REDACTED = "[REDACTED]"
REPEATS_KEPT = 10  # identical records logged per window; the rest are counted
REPEAT_WINDOW = 60.0  # seconds
REPEATS_TRACKED = 1_000  # distinct messages followed at once (the oldest is let go)
LOG_MODE = 0o600


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


@dataclass(slots=True)
class _Seen:
    since: float  # when its window began (the record's time)
    logged: int
    left_out: int
    message: str
    record: logging.LogRecord  # the first of the window: its logger and level


class RepeatLimit(logging.Filter):
    """A handler's filter: at most ``kept`` identical records per ``window`` seconds (see
    the module docstring). A window's left-out records are said in one line when the next
    record after the window arrives, or when the handler closes; ``emit`` writes that line
    (the handler's ``handle``)."""

    def __init__(
        self,
        emit: Callable[[logging.LogRecord], object],
        *,
        kept: int = REPEATS_KEPT,
        window: float = REPEAT_WINDOW,
        tracked: int = REPEATS_TRACKED,
    ) -> None:
        super().__init__()
        self._emit = emit
        self._kept = kept
        self._window = window
        self._tracked = tracked
        self._seen: OrderedDict[tuple[str, int, str, str], _Seen] = OrderedDict()  # oldest first
        self._lock = threading.Lock()  # threads log too (asyncio.to_thread)

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "repeat_summary", False):
            return True
        message = record.getMessage()
        error = record.exc_info[0].__name__ if record.exc_info and record.exc_info[0] else ""
        key = (record.name, record.levelno, message, error)
        with self._lock:
            ended = self._ended(record.created)
            seen = self._seen.get(key)
            if seen is None:
                seen = self._seen[key] = _Seen(record.created, 0, 0, message, record)
            if seen.logged < self._kept:
                seen.logged += 1
                passed = True
            else:
                seen.left_out += 1
                passed = False
        for summary in ended:
            self._emit(summary)
        return passed

    def flush(self) -> None:
        """Say what every open window left out (the handler closes)."""
        with self._lock:
            ended = self._ended(None)
        for summary in ended:
            self._emit(summary)

    def _ended(self, now: float | None) -> list[logging.LogRecord]:
        """Windows over by ``now`` (all: ``None``), and the most tracked past the limit,
        forgotten; a line for each that left records out."""
        summaries = []
        while self._seen:
            key, seen = next(iter(self._seen.items()))
            over = now is None or now - seen.since >= self._window
            if not over and len(self._seen) <= self._tracked:
                break
            del self._seen[key]
            if seen.left_out:
                summaries.append(self._summary(seen))
        return summaries

    def _summary(self, seen: _Seen) -> logging.LogRecord:
        first = seen.message.splitlines()[0] if seen.message else ""
        shown = first if len(first) <= 200 else first[:200] + "…"
        line = logging.LogRecord(
            seen.record.name,
            seen.record.levelno,
            seen.record.pathname,
            seen.record.lineno,
            "the same message %d more times within %d s, not logged: %s",
            (seen.left_out, int(self._window), shown),
            None,
        )
        line.repeat_summary = True
        return line


def _flush_repeats(handler: logging.Handler) -> None:
    for found in handler.filters:
        if isinstance(found, RepeatLimit):
            found.flush()


class Console(logging.StreamHandler):  # type: ignore[type-arg]
    """The standard error (a service's journal), with repeats limited like the file's."""

    def close(self) -> None:
        _flush_repeats(self)
        super().close()


class LogFile(logging.handlers.RotatingFileHandler):
    """The log file (rotated at 5 MB, three kept). One it cannot write (its disk is full) is
    said once on the standard error, and once more when it can write again; logging's own
    handling printed a traceback for every line in between, on the disk-full outage a
    gateway is busiest logging about. The console (a service's journal) keeps every line."""

    def __init__(self, path: Path) -> None:
        super().__init__(path, maxBytes=5_000_000, backupCount=3, encoding="utf-8")
        self._failing = False  # the last line could not be written
        self._failed = False  # ... nor the one being written now

    def _open(self) -> Any:
        """The file, new ones (each rotation's) too, readable by this user only: the
        handler's own opening gave a new file the umask's mode (0644, as a rule)."""
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC
        fd = os.open(self.baseFilename, flags, LOG_MODE)
        try:
            os.fchmod(fd, LOG_MODE)  # one an older version made
            return os.fdopen(fd, self.mode, encoding=self.encoding, errors=self.errors)
        except BaseException:
            os.close(fd)
            raise

    def close(self) -> None:
        _flush_repeats(self)
        super().close()

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
        stream = Console()
        stream.setFormatter(formatter)
        stream.addFilter(RepeatLimit(stream.handle))
        root.addHandler(stream)
    if log_file is not None:
        private_folders(log_file.parent)
        log_file.parent.chmod(0o700)  # made by an older version with the umask's mode
        for rotated in log_file.parent.glob(f"{log_file.name}.*"):
            rotated.chmod(LOG_MODE)  # the same
        writing = LogFile(log_file)
        writing.setFormatter(formatter)
        writing.addFilter(RepeatLimit(writing.handle))
        if file_level is not None:
            writing.setLevel(file_level.upper())
        root.addHandler(writing)
    levels = [logging.getLevelName(name.upper()) for name in (level, file_level or level)]
    root.setLevel(min(levels))
    for noisy in ("httpx", "httpcore", "httpx2", *quiet):
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
