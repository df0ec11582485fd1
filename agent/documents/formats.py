"""Each format's text, tables kept as markdown tables. Runs only in the worker process.

Nothing here limits time or memory: the worker's rlimits and the reader's timeout do. What
is checked here is what a limit would catch too late: a ZIP container (DOCX, XLSX, PPTX,
EPUB) whose members would expand past ``max_expanded`` bytes, or at a ratio only a
decompression bomb has, is refused before a byte is inflated. XML is parsed without
entities or network access.
"""

from __future__ import annotations

import csv
import io
import posixpath
import zipfile
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

DocKind = Literal["pdf", "docx", "xlsx", "pptx", "epub", "csv", "html"]
Unit = Literal["page", "sheet", "slide", "chapter", "document"]

MAX_RATIO = 200  # expanded / compressed size of one member; text XML stays far below
MAX_MEMBERS = 20_000
MAX_ROWS = 5_000  # of one sheet or CSV table
MAX_COLUMNS = 60

_A = "http://schemas.openxmlformats.org/drawingml/2006/main"
_P = "http://schemas.openxmlformats.org/presentationml/2006/main"
_R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_PKG = "http://schemas.openxmlformats.org/package/2006/relationships"


class DocumentRefused(Exception):
    """The file is not readable as its format says (damaged, encrypted, a bomb)."""


@dataclass(frozen=True, slots=True)
class Request:
    path: str
    kind: DocKind
    pages: tuple[int, ...] = ()  # 1-based; empty: from the first, as many as fit
    sheet: str | None = None
    max_chars: int = 12_000
    max_expanded: int = 200_000_000
    # Tesseract (its path, its languages: "eng+deu"): a scan's pages are read by OCR
    ocr: tuple[str, str] | None = None
    ocr_seconds: float = 10.0  # of the reader's time, at most this much for OCR


@dataclass(slots=True)
class Extract:
    kind: DocKind
    unit: Unit
    total: int  # pages, sheets, slides or chapters in the whole document
    parts: list[tuple[str, str]] = field(default_factory=list)  # (label, text), in order
    names: list[str] = field(default_factory=list)  # sheet names
    no_text_layer: bool = False
    truncated_after: str | None = None  # the label of the last part that fit
    ocr: bool = False  # a scan whose words were read off its pages (OCR)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "unit": self.unit,
            "total": self.total,
            "parts": self.parts,
            "names": self.names,
            "no_text_layer": self.no_text_layer,
            "truncated_after": self.truncated_after,
            "ocr": self.ocr,
        }


def extract(request: Request) -> Extract:
    readers = {
        "pdf": _pdf,
        "docx": _docx,
        "xlsx": _xlsx,
        "pptx": _pptx,
        "epub": _epub,
        "csv": _csv,
        "html": _html_file,
    }
    return readers[request.kind](request)


# -- containers ---------------------------------------------------------------------------


def check_zip(path: str, max_expanded: int) -> None:
    """Refuse a ZIP whose members would expand past the limit or at a bomb's ratio. The
    declared sizes bound what :mod:`zipfile` will inflate, so checking them is enough."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except (zipfile.BadZipFile, OSError) as exc:
        raise DocumentRefused(
            f"not a valid file of its kind (damaged ZIP container: {exc})"
        ) from exc
    if len(members) > MAX_MEMBERS:
        raise DocumentRefused(f"refused: {len(members)} parts in one file")
    total = 0
    for member in members:
        total += member.file_size
        ratio = member.file_size / max(1, member.compress_size)
        if member.file_size > 1_000_000 and ratio > MAX_RATIO:
            raise DocumentRefused(
                f"refused: {member.filename} would expand {ratio:.0f} times "
                "(a decompression bomb, not a document)"
            )
    if total > max_expanded:
        raise DocumentRefused(
            f"refused: it would expand to {total // 1_000_000} MB, over the "
            f"{max_expanded // 1_000_000} MB limit"
        )


def _xml(data: bytes) -> Any:
    from lxml import etree  # noqa: PLC0415 - the worker imports what the format needs

    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False)
    return etree.fromstring(data, parser)


# -- the formats --------------------------------------------------------------------------


def _pdf(request: Request) -> Extract:
    from pypdf import PdfReader  # noqa: PLC0415
    from pypdf.errors import PdfReadError  # noqa: PLC0415

    try:
        reader = PdfReader(request.path, strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            raise DocumentRefused("the PDF is encrypted with a password")
        total = len(reader.pages)
        out = Extract("pdf", "page", total)
        wanted = request.pages or tuple(range(1, total + 1))
        any_text = False
        for number in wanted:
            if number > total:
                break
            text = (reader.pages[number - 1].extract_text() or "").strip()
            any_text = any_text or bool(text)
            if not add_part(out, f"page {number}", text, request.max_chars):
                break
    except (PdfReadError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise DocumentRefused(f"the PDF is damaged or not a PDF ({exc})") from exc
    out.no_text_layer = bool(out.parts) and not any_text  # pages read, none with text
    return out


def _docx(request: Request) -> Extract:
    check_zip(request.path, request.max_expanded)
    import docx  # noqa: PLC0415
    from docx.table import Table  # noqa: PLC0415

    try:
        document = docx.Document(request.path)
    except (KeyError, ValueError, zipfile.BadZipFile) as exc:
        raise DocumentRefused(f"the DOCX is damaged or not a DOCX ({exc})") from exc
    blocks: list[str] = []
    for item in document.iter_inner_content():
        if isinstance(item, Table):
            rows = [[cell.text.strip() for cell in row.cells] for row in item.rows]
            blocks.append(markdown_table(rows))
        elif item.text.strip():
            style = (item.style.name if item.style is not None else "") or ""
            level = style.removeprefix("Heading ").strip()
            prefix = (
                "#" * int(level) + " " if style.startswith("Heading ") and level.isdigit() else ""
            )
            blocks.append(prefix + item.text.strip())
    out = Extract("docx", "document", 1)
    add_part(out, "document", "\n\n".join(blocks), request.max_chars)
    return out


def _xlsx(request: Request) -> Extract:
    check_zip(request.path, request.max_expanded)
    import openpyxl  # noqa: PLC0415

    try:
        book = openpyxl.load_workbook(request.path, read_only=True, data_only=True)
    except (KeyError, ValueError, OSError, zipfile.BadZipFile) as exc:
        raise DocumentRefused(f"the spreadsheet is damaged or not XLSX ({exc})") from exc
    try:
        names = list(book.sheetnames)
        out = Extract("xlsx", "sheet", len(names), names=names)
        for index in _chosen_sheets(names, request.sheet):
            sheet = book[names[index]]
            rows = _limited(
                [[_cell(v) for v in row[:MAX_COLUMNS]] for row in sheet.iter_rows(values_only=True)]
            )
            if not add_part(out, f"sheet {names[index]}", markdown_table(rows), request.max_chars):
                break
    finally:
        book.close()
    return out


def _chosen_sheets(names: Sequence[str], sheet: str | None) -> list[int]:
    if sheet is None:
        return list(range(len(names)))
    if sheet in names:
        return [names.index(sheet)]
    lowered = [n.lower() for n in names]
    if sheet.lower() in lowered:
        return [lowered.index(sheet.lower())]
    if sheet.isdigit() and 1 <= int(sheet) <= len(names):
        return [int(sheet) - 1]
    raise DocumentRefused(f"no sheet {sheet!r}; the sheets are: {', '.join(names)}")


def _csv(request: Request) -> Extract:
    text = _head(request.path, request.max_expanded).decode("utf-8-sig", errors="replace")
    try:
        dialect: Any = csv.Sniffer().sniff(text[:8192], delimiters=",;\t|")
    except csv.Error:
        dialect = csv.excel
    rows = _limited(row[:MAX_COLUMNS] for row in csv.reader(io.StringIO(text), dialect))
    out = Extract("csv", "document", 1)
    add_part(out, "table", markdown_table(rows), request.max_chars)
    return out


def _pptx(request: Request) -> Extract:
    return _zipped_parts(
        request,
        ("pptx", "slide", "the presentation is damaged or not PPTX"),
        _slide_paths,
        lambda data: _slide_text(_xml(data)),
    )


def _zipped_parts(
    request: Request,
    what: tuple[DocKind, Unit, str],
    parts_of: Callable[[zipfile.ZipFile], list[str]],
    text_of: Callable[[bytes], str],
) -> Extract:
    """The wanted parts (slides, chapters) of a ZIP-based document, in order, each read
    from the archive only when wanted; ``what``: its kind, its parts' name, and what to say
    when the archive is damaged."""
    kind, unit, damaged = what
    check_zip(request.path, request.max_expanded)
    try:
        with zipfile.ZipFile(request.path) as archive:
            parts = parts_of(archive)
            out = Extract(kind, unit, len(parts))
            for number in request.pages or tuple(range(1, len(parts) + 1)):
                if number > len(parts):
                    break
                text = text_of(archive.read(parts[number - 1]))
                if not add_part(out, f"{unit} {number}", text, request.max_chars):
                    break
    except (KeyError, zipfile.BadZipFile, ValueError) as exc:
        raise DocumentRefused(f"{damaged} ({exc})") from exc
    return out


def _slide_paths(archive: zipfile.ZipFile) -> list[str]:
    """The slides in the order the presentation lists them (not their file names')."""
    rels = _xml(archive.read("ppt/_rels/presentation.xml.rels"))
    targets = {
        rel.get("Id"): posixpath.normpath(posixpath.join("ppt", rel.get("Target", "")))
        for rel in rels.iter(f"{{{_PKG}}}Relationship")
    }
    presentation = _xml(archive.read("ppt/presentation.xml"))
    ids = [node.get(f"{{{_R}}}id") for node in presentation.iter(f"{{{_P}}}sldId")]
    return [targets[i] for i in ids if i in targets]


def _slide_text(root: Any) -> str:
    blocks: list[str] = []
    for node in root.iter(f"{{{_A}}}tbl", f"{{{_P}}}txBody"):
        if node.tag == f"{{{_A}}}tbl":
            rows = [
                [_runs(cell) for cell in row.iter(f"{{{_A}}}tc")]
                for row in node.iter(f"{{{_A}}}tr")
            ]
            blocks.append(markdown_table(rows))
        elif not _inside_table(node):
            paragraphs = [_runs(p) for p in node.iter(f"{{{_A}}}p")]
            blocks.append("\n".join(p for p in paragraphs if p))
    return "\n\n".join(b for b in blocks if b)


def _inside_table(node: Any) -> bool:
    return any(parent.tag == f"{{{_A}}}tbl" for parent in node.iterancestors())


def _runs(node: Any) -> str:
    return "".join(t.text or "" for t in node.iter(f"{{{_A}}}t")).strip()


def _epub(request: Request) -> Extract:
    return _zipped_parts(
        request,
        ("epub", "chapter", "the EPUB is damaged"),
        _spine,
        lambda data: html_text(data.decode("utf-8", "replace")),
    )


def _spine(archive: zipfile.ZipFile) -> list[str]:
    container = _xml(archive.read("META-INF/container.xml"))
    rootfile = next(n for n in container.iter() if str(n.tag).endswith("rootfile"))
    opf_path = rootfile.get("full-path", "")
    opf = _xml(archive.read(opf_path))
    base = posixpath.dirname(opf_path)
    items = {
        n.get("id"): posixpath.normpath(posixpath.join(base, n.get("href", "")))
        for n in opf.iter()
        if str(n.tag).endswith("}item")
    }
    order = [n.get("idref") for n in opf.iter() if str(n.tag).endswith("}itemref")]
    return [items[i] for i in order if i in items]


def _html_file(request: Request) -> Extract:
    raw = _head(request.path, request.max_expanded)
    out = Extract("html", "document", 1)
    add_part(out, "document", html_text(raw.decode("utf-8", "replace")), request.max_chars)
    return out


def html_text(html: str) -> str:
    """The readable text of a page as markdown, tables kept (trafilatura, as web_fetch)."""
    import trafilatura  # noqa: PLC0415

    text = trafilatura.extract(
        html, output_format="markdown", include_tables=True, include_links=False, favor_recall=True
    )
    if text:
        return str(text)
    from lxml import html as lxml_html  # noqa: PLC0415 - a fragment trafilatura finds empty

    try:
        return str(lxml_html.fromstring(html).text_content()).strip()
    except ValueError:
        return ""


# -- shared -------------------------------------------------------------------------------


def _head(path: str, limit: int) -> bytes:
    """At most ``limit`` bytes of a plain file (CSV, HTML): never the whole of a huge one."""
    with Path(path).open("rb") as handle:
        return handle.read(limit)


def add_part(out: Extract, label: str, text: str, max_chars: int) -> bool:
    """Add a part unless the parts already fill ``max_chars``; a first part too long alone
    is cut. Returns whether more may follow."""
    used = sum(len(t) for _, t in out.parts)
    if out.parts and used + len(text) > max_chars:
        out.truncated_after = out.parts[-1][0]
        return False
    if len(text) > max_chars:
        out.parts.append((label, text[:max_chars]))
        out.truncated_after = f"{label} (cut at {max_chars} characters)"
        return False
    out.parts.append((label, text))
    return True


def _cell(value: object) -> str:
    return "" if value is None else str(value)


def _limited(rows: Iterable[list[str]]) -> list[list[str]]:
    out: list[list[str]] = []
    for row in rows:
        if len(out) >= MAX_ROWS:
            out.append([f"... more rows (only the first {MAX_ROWS} are read)"])
            break
        out.append(list(row))
    while out and not any(c.strip() for c in out[-1]):
        out.pop()
    return out


def markdown_table(rows: Sequence[Sequence[str]]) -> str:
    """Rows as a markdown table, the first row as its header."""
    rows = [r for r in rows if any(c.strip() for c in r)]
    if not rows:
        return ""
    width = max(len(r) for r in rows)

    def line(row: Sequence[str]) -> str:
        cells = [_escape(c) for c in row] + [""] * (width - len(row))
        return "| " + " | ".join(cells) + " |"

    return "\n".join([line(rows[0]), "|" + " --- |" * width, *map(line, rows[1:])])


def _escape(cell: str) -> str:
    return " ".join(cell.split()).replace("|", "\\|")
