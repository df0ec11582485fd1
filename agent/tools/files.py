"""File tools confined to the workspace: read_file, write_file, edit_file, list_dir."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path
from typing import Any

from agent.documents.formats import DocKind
from agent.documents.ranges import parse_pages
from agent.documents.reader import DocumentError, DocumentReader, document_kind
from agent.llm.types import ImagePart
from agent.memory import GROUPS, PEOPLE
from agent.tools.base import Effect, Outside, Tool, ToolContext, ToolError, ToolResult, schema
from agent.untrusted import wrap_untrusted
from agent.workspace import PathDenied, Workspace
from gateway.config.media import DocumentSettings
from gateway.core.system.fileutil import write_atomic

MAX_READ_BYTES = 2 * 1024 * 1024
MAX_LIST_ENTRIES = 500
# Words of a request for a file change: a hint for the approver (agent.policy), no more.
FILE_INTENT = ("write", "save", "create", "edit", "rename")


def _resolve(ctx: ToolContext, path: str, *, write: bool = False) -> Path:
    try:
        return ctx.workspace.resolve(path, write=write)
    except PathDenied as exc:
        raise ToolError(str(exc)) from exc


def read_text(workspace: Workspace, path: Path) -> str:
    """Read a UTF-8 file without following a symlink swapped in after resolution."""
    try:
        fd = os.open(path, workspace.open_flags(os.O_RDONLY))
    except FileNotFoundError:
        raise ToolError(f"{workspace.relative(path)} does not exist") from None
    except IsADirectoryError:
        raise ToolError(f"{workspace.relative(path)} is a directory; use list_dir") from None
    except OSError as exc:
        raise ToolError(f"cannot open {workspace.relative(path)}: {exc.strerror}") from None
    with os.fdopen(fd, "rb") as handle:
        if stat.S_ISDIR(os.fstat(handle.fileno()).st_mode):
            raise ToolError(f"{workspace.relative(path)} is a directory; use list_dir")
        data = handle.read(MAX_READ_BYTES + 1)
    if b"\x00" in data[:8192]:
        raise ToolError(f"{workspace.relative(path)} is a binary file")
    text = data[:MAX_READ_BYTES].decode("utf-8", errors="replace")
    if len(data) > MAX_READ_BYTES:
        text += f"\n[... file truncated at {MAX_READ_BYTES} bytes]"
    return text


def write_text_atomic(path: Path, content: str) -> None:
    """Write through a temporary file and rename, so readers never see half a file."""
    write_atomic(path, content)


class ReadFile(Tool):
    name = "read_file"
    description = (
        "Read a workspace file: text by lines (offset, limit); PDF, DOCX, XLSX, CSV, PPTX, "
        "HTML, EPUB as text (pages: '2-5' or '1,3' of pages, slides or chapters; sheet: "
        "name or number)."
    )
    parameters = schema(
        {
            "path": {"type": "string"},
            "offset": {"type": "integer", "minimum": 1},
            "limit": {"type": "integer", "minimum": 1},
            "pages": {"type": "string", "maxLength": 200},
            "sheet": {"type": "string", "maxLength": 200},
        },
        ("path",),
    )

    def __init__(self, documents: DocumentReader | None = None) -> None:
        self._documents = documents or DocumentReader(DocumentSettings())

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = _resolve(ctx, args["path"])
        kind = await asyncio.to_thread(_document_kind, path)
        if kind is not None:
            return await self._document(path, kind, args, ctx)
        if args.get("pages") or args.get("sheet"):
            raise ToolError(
                f"{args['path']} is not a document (PDF, DOCX, XLSX, CSV, PPTX, HTML, EPUB): "
                "pages and sheet are for those; use offset and limit for text"
            )
        text = await asyncio.to_thread(read_text, ctx.workspace, path)
        offset, limit = args.get("offset"), args.get("limit")
        if offset or limit:
            lines = text.splitlines(keepends=True)
            start = (offset or 1) - 1
            text = "".join(lines[start : start + limit if limit else None])
            if not text:
                return ToolResult(f"(no lines from {offset or 1}; the file has {len(lines)} lines)")
        # A file someone sent, or memory someone else's turns wrote, is outside content:
        # marked as such, and reading it taints the turn like a web page.
        if ctx.workspace.is_untrusted(path):
            shown = wrap_untrusted(f"file {ctx.workspace.relative(path)}", text or "(empty file)")
            return ToolResult(shown, untrusted=True)
        return ToolResult(text or "(empty file)")

    def read_from(self, args: dict[str, Any]) -> Outside:
        path = os.path.normpath(str(args.get("path", "")).strip())
        if path.startswith(f"{PEOPLE}/"):
            return Outside("another person's memory", path)
        if path.startswith(f"{GROUPS}/"):
            return Outside("a group's memory", path)
        return Outside("a file someone sent", path)

    async def _document(
        self, path: Path, kind: DocKind, args: dict[str, Any], ctx: ToolContext
    ) -> ToolResult:
        """A document's text, read in a limited process of its own (agent/documents)."""
        shown = ctx.workspace.relative(path)
        limit = self._documents.settings.max_pages_per_read
        pages = parse_pages(str(args["pages"]), limit=limit) if args.get("pages") else ()
        try:
            reading = await self._documents.read(
                path, kind, pages=pages, sheet=args.get("sheet"), name=shown
            )
        except DocumentError as exc:
            raise ToolError(f"{shown}: {exc}") from None
        extract = reading.extract
        if pages and not extract.parts and not extract.no_text_layer:
            raise ToolError(
                f"{shown} has {extract.total} {extract.unit}(s); pages {args['pages']} is past its end"
            )
        text = reading.render()
        pictures: tuple[ImagePart, ...] = ()
        # a scan someone sent: its pages drawn beside it (nothing is written among the
        # workspace's own files by a read)
        if extract.no_text_layer and kind == "pdf" and ctx.workspace.is_untrusted(path):
            pictures = await self._scan_pages(path, pages, extract.total)
            if pictures:
                text += (
                    f"\n[{len(pictures)} of its pages follow as pictures]"
                    if len(pictures) > 1
                    else "\n[1 page follows as a picture]"
                )
        # A file someone sent is outside content: marked as such, and reading it taints the
        # turn, as web_fetch does (agent/untrusted.py).
        if ctx.workspace.is_untrusted(path):
            text = wrap_untrusted(f"document {shown}", text)
            return ToolResult(text, untrusted=True, images=pictures)
        return ToolResult(text, images=pictures)

    async def _scan_pages(
        self, path: Path, pages: tuple[int, ...], total: int
    ) -> tuple[ImagePart, ...]:
        """The pages asked of a scan (or its first ones) drawn as pictures, at most
        ``tools.documents.scan_pages`` a read; none when they cannot be drawn."""
        most = self._documents.settings.scan_pages
        wanted = [page for page in pages or range(1, total + 1) if page <= total][:most]
        try:
            drawn = await self._documents.draw(path, wanted)
        except (DocumentError, OSError):
            return ()
        return tuple(ImagePart(str(picture), "image/png") for picture in drawn)


def _document_kind(path: Path) -> DocKind | None:
    return document_kind(path) if path.is_file() else None


class _Writes(Tool):
    """A tool that writes the workspace file its ``path`` names."""

    targets = ("path",)

    async def refused_anyway(self, args: dict[str, Any], ctx: ToolContext) -> str | None:
        try:
            ctx.workspace.resolve(str(args.get("path", "")), write=True)
        except PathDenied as exc:  # a protected file, or outside what this turn may reach
            return str(exc)
        return None


class WriteFile(_Writes):
    name = "write_file"
    description = "Create or overwrite a text file in the workspace (folders are created)."
    parameters = schema(
        {"path": {"type": "string"}, "content": {"type": "string"}}, ("path", "content")
    )
    effect = Effect.WRITE
    intent = FILE_INTENT
    does = "writes a workspace file"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = _resolve(ctx, args["path"], write=True)
        if path == ctx.workspace.root or path.is_dir():
            raise ToolError(f"{args['path']} is a directory")
        content: str = args["content"]
        await asyncio.to_thread(write_text_atomic, path, content)
        return ToolResult(f"wrote {len(content)} characters to {ctx.workspace.relative(path)}")


class EditFile(_Writes):
    name = "edit_file"
    description = (
        "Replace one exact occurrence of old_text with new_text in a workspace file"
        " (read it first)."
    )
    parameters = schema(
        {
            "path": {"type": "string"},
            "old_text": {"type": "string", "minLength": 1},
            "new_text": {"type": "string"},
        },
        ("path", "old_text", "new_text"),
    )
    effect = Effect.WRITE
    intent = FILE_INTENT
    does = "changes a workspace file"

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        path = _resolve(ctx, args["path"], write=True)

        def edit() -> str:
            text = read_text(ctx.workspace, path)
            count = text.count(args["old_text"])
            if count == 0:
                raise ToolError("old_text was not found; read the file and copy the text exactly")
            if count > 1:
                raise ToolError(
                    f"old_text occurs {count} times; include more context to make it unique"
                )
            write_text_atomic(path, text.replace(args["old_text"], args["new_text"], 1))
            return f"edited {ctx.workspace.relative(path)}"

        return ToolResult(await asyncio.to_thread(edit))


class ListDir(Tool):
    name = "list_dir"
    description = "List a workspace folder (default: its root)."
    parameters = schema({"path": {"type": "string"}})

    async def run(self, args: dict[str, Any], ctx: ToolContext) -> ToolResult:
        try:  # a conversation that may see only some files lists just those
            path = ctx.workspace.resolve(args.get("path", "."), listing=True)
        except PathDenied as exc:
            raise ToolError(str(exc)) from exc

        def listing() -> str:
            if not path.is_dir():
                raise ToolError(f"{args.get('path', '.')} is not a folder")
            visible = (p for p in path.iterdir() if ctx.workspace.shows(p))
            entries = sorted(visible, key=lambda p: (not p.is_dir(), p.name))
            lines = []
            for entry in entries[:MAX_LIST_ENTRIES]:
                if entry.is_symlink():
                    lines.append(f"{entry.name} -> (link)")
                elif entry.is_dir():
                    lines.append(f"{entry.name}/")
                else:
                    lines.append(f"{entry.name} ({entry.stat().st_size} bytes)")
            if len(entries) > MAX_LIST_ENTRIES:
                lines.append(f"... and {len(entries) - MAX_LIST_ENTRIES} more")
            return "\n".join(lines) or "(empty folder)"

        return ToolResult(await asyncio.to_thread(listing))
