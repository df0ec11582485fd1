"""Reading a document from the gateway: the worker process, a timeout, what the model reads.

Extraction never runs on the event loop nor in the gateway's process: each read starts
``agent.documents.worker`` with a minimal environment (no secrets), its request on stdin,
and kills it at ``timeout_seconds``. At most ``concurrency`` run at once, so a burst of
attachments cannot fill the machine.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import os
import shutil
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.documents.formats import DocKind, Extract
from gateway.config.media import DocumentSettings
from gateway.core.system.fileutil import write_atomic

_SUFFIXES: dict[str, DocKind] = {
    ".pdf": "pdf",
    ".docx": "docx",
    ".xlsx": "xlsx",
    ".xlsm": "xlsx",
    ".pptx": "pptx",
    ".epub": "epub",
    ".csv": "csv",
    ".tsv": "csv",
    ".html": "html",
    ".htm": "html",
    ".xhtml": "html",
}
_MIME: dict[str, DocKind] = {
    "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
    "application/epub+zip": "epub",
    "text/csv": "csv",
    "text/html": "html",
}
_NAMES: dict[DocKind, str] = {
    "pdf": "PDF",
    "docx": "Word document",
    "xlsx": "spreadsheet",
    "pptx": "presentation",
    "epub": "EPUB book",
    "csv": "CSV table",
    "html": "HTML page",
}


class DocumentError(Exception):
    """The document could not be read; the message says why, for the person and the model."""


def document_kind(path: Path, mime_type: str | None = None) -> DocKind | None:
    """What kind of document ``path`` is (by its name, its MIME type, then its first bytes);
    None for plain text and for files that are no document we read."""
    kind = _SUFFIXES.get(path.suffix.lower()) or _MIME.get((mime_type or "").split(";")[0])
    if kind is not None:
        return kind
    with contextlib.suppress(OSError), path.open("rb") as handle:
        if handle.read(5) == b"%PDF-":
            return "pdf"
    return None


@dataclass(frozen=True, slots=True)
class Reading:
    """One read: the extract and how it is shown."""

    extract: Extract
    name: str

    @property
    def text(self) -> str:
        return "\n\n".join(text for _, text in self.extract.parts if text).strip()

    def header(self) -> str:
        ex = self.extract
        what = _NAMES[ex.kind]
        if ex.unit == "document":
            return f"{self.name}: {what}"
        plural = "" if ex.total == 1 else "s"
        head = f"{self.name}: {what}, {ex.total} {ex.unit}{plural}"
        if ex.ocr:
            head += " (a scan, read by OCR)"
        if ex.names and ex.kind == "xlsx":
            head += f" ({', '.join(ex.names)})"
        return head

    def render(self) -> str:
        """The header, a note when there is no text, then each part under its label."""
        ex = self.extract
        lines = [f"[{self.header()}]"]
        if ex.no_text_layer:
            lines.append(
                "[no text layer: the PDF holds only images of its pages (a scan), so there "
                "is no text to read; a model that sees images is shown the pages instead]"
            )
            return "\n".join(lines)
        for label, text in ex.parts:
            if ex.unit != "document":
                lines.append(f"--- {label} ---")
            lines.append(text or "(no text)")
        if ex.truncated_after:
            more = (
                f"; read on with pages (e.g. the {ex.unit}s after it)"
                if ex.unit in ("page", "slide", "chapter")
                else "; ask for one sheet with sheet"
                if ex.unit == "sheet"
                else ""
            )
            lines.append(f"[... stopped after {ex.truncated_after}: the size cap{more}]")
        return "\n".join(lines)


def ocr_for(settings: DocumentSettings, *, vision: bool) -> tuple[str, str] | None:
    """Tesseract's path and the languages scans are read in by OCR (``tools.documents.ocr``),
    or ``None``: "auto" reads them for a model that sees no images (one that does is shown
    the pages), where Tesseract is installed."""
    wanted = settings.ocr == "always" or (settings.ocr == "auto" and not vision)
    program = shutil.which("tesseract") if wanted else None
    return None if program is None else (program, settings.ocr_languages)


class DocumentReader:
    """Reads documents through the worker process, under :class:`DocumentSettings`; scans
    by OCR as ``tools.documents.ocr`` says, asking ``sees_images`` (whether the model is
    shown pictures, at the moment of reading) for "auto"; without it, no OCR at all."""

    def __init__(
        self, settings: DocumentSettings, *, sees_images: Callable[[], bool] | None = None
    ) -> None:
        self.settings = settings
        self._sees_images = sees_images
        self._ocr_budget = settings.timeout_seconds * 0.6  # the rest: opening it, answering
        self._slots = asyncio.Semaphore(settings.concurrency)

    @property
    def ocr(self) -> tuple[str, str] | None:
        """How a scan is read by OCR now (:func:`ocr_for`), or ``None``: not."""
        if self._sees_images is None:
            return None
        return ocr_for(self.settings, vision=self._sees_images())

    async def read(
        self,
        path: Path,
        kind: DocKind,
        *,
        pages: tuple[int, ...] = (),
        sheet: str | None = None,
        max_chars: int | None = None,
        name: str | None = None,
        ocr_seconds: float | None = None,
    ) -> Reading:
        """What ``path`` says, as much as ``max_chars`` holds; a scan's words by OCR, when
        this reader does OCR, for at most ``ocr_seconds`` (and 60 % of the reader's time)."""
        limits = self.settings
        budget = self._ocr_budget if ocr_seconds is None else min(ocr_seconds, self._ocr_budget)
        data = await self._ask(
            {
                "path": str(path),
                "kind": kind,
                "pages": list(pages),
                "sheet": sheet,
                "max_chars": max_chars or limits.max_read_chars,
                "max_expanded": limits.max_expanded_mb * 1_000_000,
                "ocr": self.ocr,
                "ocr_seconds": budget,
            }
        )
        extract = Extract(
            kind=data["kind"],
            unit=data["unit"],
            total=int(data["total"]),
            parts=[(str(a), str(b)) for a, b in data["parts"]],
            names=list(data["names"]),
            no_text_layer=bool(data["no_text_layer"]),
            truncated_after=data["truncated_after"],
            ocr=bool(data["ocr"]),
        )
        return Reading(extract, name or path.name)

    async def draw(self, path: Path, pages: Sequence[int]) -> list[Path]:
        """Pages ``pages`` (1-based; those past its end left out) of the scanned PDF at
        ``path`` as PNG pictures beside it (:func:`page_picture`), drawn once: a page drawn
        before is not drawn again."""
        wanted = [page for page in dict.fromkeys(pages) if page > 0]
        missing = [page for page in wanted if not page_picture(path, page).is_file()]
        if missing:
            data = await self._ask({"path": str(path), "kind": "pdf", "pictures": missing})
            for page, png in data["pictures"]:  # the pages it has, each with its number
                picture = page_picture(path, int(page))
                await asyncio.to_thread(write_atomic, picture, base64.b64decode(png))
        return [page_picture(path, p) for p in wanted if page_picture(path, p).is_file()]

    async def words_of(self, picture: Path, *, seconds: float) -> str | None:
        """The words in ``picture`` read by OCR within ``seconds`` (``""``: none found), or
        ``None`` when this reader does no OCR."""
        ocr = self.ocr
        if ocr is None:
            return None
        data = await self._ask(
            {
                "words_of": str(picture),
                "ocr": list(ocr),
                "ocr_seconds": min(seconds, self._ocr_budget),
            }
        )
        return str(data["text"])

    async def _ask(self, request: dict[str, Any]) -> Any:
        """What the worker answers ``request`` with, under the limits, one of the
        ``concurrency`` readers at a time; its refusal raised as :class:`DocumentError`."""
        limits = self.settings
        request["memory_mb"] = limits.memory_mb
        request["cpu_seconds"] = max(1, int(limits.timeout_seconds))
        async with self._slots:
            answer = await self._run(json.dumps(request).encode())
        if "error" in answer:
            raise DocumentError(str(answer["error"]))
        return answer["ok"]

    async def _run(self, request: bytes) -> dict[str, Any]:
        try:
            process = await asyncio.create_subprocess_exec(
                sys.executable,
                "-m",
                "agent.documents.worker",
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL,
                env=_worker_env(),
            )
        except OSError as exc:  # out of processes or memory: this read fails, not the gateway
            raise DocumentError(f"the reader could not start ({exc.strerror or exc})") from exc
        try:
            async with asyncio.timeout(self.settings.timeout_seconds):
                out, _ = await process.communicate(request)
        except TimeoutError:
            raise DocumentError(
                f"reading it took longer than {self.settings.timeout_seconds:g} seconds "
                "(stopped: the file may be damaged or crafted)"
            ) from None
        finally:
            if process.returncode is None:
                process.kill()
                await process.wait()
        if process.returncode != 0 or not out:
            raise DocumentError(_died(process.returncode))
        try:
            answer: dict[str, Any] = json.loads(out)
        except ValueError:
            raise DocumentError("the reader's answer was cut short") from None
        return answer


def page_picture(document: Path, page: int) -> Path:
    """Where page ``page`` of a scanned document is kept as a picture: beside it."""
    return document.with_name(f"{document.stem}-page{page}.png")


def _died(code: int | None) -> str:
    if code is not None and code < 0 and -code in (9, 24):  # SIGKILL, SIGXCPU
        return "reading it needed more time or memory than documents may use (stopped)"
    return f"the reader stopped without an answer (exit code {code}; a damaged or crafted file)"


def _worker_env() -> dict[str, str]:
    """What the worker inherits: where Python finds our code, nothing else (no keys)."""
    env = {"PATH": os.defpath, "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1"}
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = root  # the source tree, when not installed
    return env
