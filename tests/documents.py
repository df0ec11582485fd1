"""Real documents made by the tests: PDFs written by hand (text, scanned, damaged), DOCX
and XLSX written with the libraries the gateway reads them with, and a decompression bomb."""

from __future__ import annotations

import io
import zipfile
import zlib
from pathlib import Path


def pdf(pages: list[str]) -> bytes:
    """A valid PDF with one page per string, each a line of Helvetica text (lines, where
    the string has several; an empty string: a page that only draws a grey box, as a
    scan's image would be, with no text at all)."""
    objects: list[bytes] = []
    count = len(pages)
    kids = " ".join(f"{3 + 2 * i} 0 R" for i in range(count))
    objects.append(b"<< /Type /Catalog /Pages 2 0 R >>")
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {count} >>".encode())
    font = 3 + 2 * count
    for index, line in enumerate(pages):
        content = 4 + 2 * index
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content} 0 R"
            f" /Resources << /Font << /F1 {font} 0 R >> >> >>".encode()
        )
        if "\n" in line:  # a page of text: 11 pt lines from the top
            shown = " T* ".join(f"({_escaped(row)}) Tj" for row in line.split("\n"))
            stream = f"BT /F1 11 Tf 14 TL 72 740 Td {shown} ET".encode()
        elif line:
            stream = f"BT /F1 14 Tf 72 720 Td ({_escaped(line)}) Tj ET".encode()
        else:
            stream = b"0.5 g 72 72 468 648 re f"
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects.append(b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>")
    return _written(objects)


def _escaped(text: str) -> str:
    return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")


def _written(objects: list[bytes]) -> bytes:
    """A PDF file of ``objects`` (numbered from 1, the first the catalog)."""
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()


def scanned_pdf(pages: list[str]) -> bytes:
    """A scan as a scanner makes it: each page only an image (of ``pdf(pages)``'s page,
    drawn by PDFium at 200 dpi in shades of grey), no text layer at all."""
    import numpy as np
    import pypdfium2 as pdfium

    source = pdfium.PdfDocument(pdf(pages))
    images = []
    for page in source:
        pixels = np.asarray(page.render(scale=200 / 72, grayscale=True).to_numpy())
        images.append(pixels[:, :, 0] if pixels.ndim == 3 else pixels)
    source.close()
    objects: list[bytes] = [b"<< /Type /Catalog /Pages 2 0 R >>"]
    kids = " ".join(f"{3 + 3 * i} 0 R" for i in range(len(images)))
    objects.append(f"<< /Type /Pages /Kids [{kids}] /Count {len(images)} >>".encode())
    for index, pixels in enumerate(images):
        page, content, image = 3 + 3 * index, 4 + 3 * index, 5 + 3 * index
        objects.append(
            f"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents {content} 0 R"
            f" /Resources << /XObject << /Im{page} {image} 0 R >> >> >>".encode()
        )
        drawn = f"q 612 0 0 792 0 0 cm /Im{page} Do Q".encode()
        objects.append(b"<< /Length %d >>\nstream\n" % len(drawn) + drawn + b"\nendstream")
        height, width = pixels.shape
        data = zlib.compress(np.ascontiguousarray(pixels).tobytes())
        objects.append(
            f"<< /Type /XObject /Subtype /Image /Width {width} /Height {height}"
            f" /ColorSpace /DeviceGray /BitsPerComponent 8 /Filter /FlateDecode"
            f" /Length {len(data)} >>\nstream\n".encode()
            + data
            + b"\nendstream"
        )
    return _written(objects)


DAMAGED_PDF = b"%PDF-1.7\n1 0 obj\n<< /Type /Catalog /Pages 9 0 R >>\nthis is not a PDF any more"


def docx(path: Path, *, heading: str, paragraph: str, table: list[list[str]]) -> Path:
    import docx as python_docx

    document = python_docx.Document()
    document.add_heading(heading, level=1)
    document.add_paragraph(paragraph)
    grid = document.add_table(rows=len(table), cols=len(table[0]))
    for r, row in enumerate(table):
        for c, value in enumerate(row):
            grid.cell(r, c).text = value
    document.save(path)
    return path


def xlsx(path: Path, sheets: dict[str, list[list[object]]]) -> Path:
    import openpyxl

    book = openpyxl.Workbook()
    book.remove(book.active)
    for name, rows in sheets.items():
        sheet = book.create_sheet(name)
        for row in rows:
            sheet.append(row)
    book.save(path)
    return path


def bomb_docx(path: Path, *, expanded_mb: int = 64) -> Path:
    """A DOCX whose document part inflates from a few dozen KB to ``expanded_mb`` MB."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED, compresslevel=9) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        chunk = b"<w:t>" + b"A" * (1024 * 1024 - 12) + b"</w:t>\n"
        with z.open("word/document.xml", "w", force_zip64=True) as member:
            for _ in range(expanded_mb):
                member.write(chunk)
    return path


_P = "http://schemas.openxmlformats.org/presentationml/2006/main"
_A = "http://schemas.openxmlformats.org/drawingml/2006/main"
_R = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"


def pptx(path: Path, slides: list[tuple[str, list[list[str]]]]) -> Path:
    """A PPTX (the parts a reader needs) whose slide files are named in the reverse of the
    order the presentation lists them, as after slides were moved around."""
    count = len(slides)
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        ids = "".join(f'<p:sldId id="{256 + n}" r:id="rId{n + 1}"/>' for n in range(count))
        z.writestr(
            "ppt/presentation.xml",
            f'<p:presentation xmlns:p="{_P}" xmlns:r="{_R}"><p:sldIdLst>{ids}</p:sldIdLst></p:presentation>',
        )
        rels = "".join(
            f'<Relationship Id="rId{n + 1}" Target="slides/slide{count - n}.xml" '
            f'Type="{_R}/slide"/>'
            for n in range(count)
        )
        z.writestr(
            "ppt/_rels/presentation.xml.rels",
            f'<Relationships xmlns="http://schemas.openxmlformats.org/package/2006/relationships">{rels}</Relationships>',
        )
        for n, (title, table) in enumerate(slides):
            rows = "".join(
                "<a:tr>"
                + "".join(
                    f"<a:tc><a:txBody><a:p><a:r><a:t>{c}</a:t></a:r></a:p></a:txBody></a:tc>"
                    for c in row
                )
                + "</a:tr>"
                for row in table
            )
            grid = (
                f"<p:graphicFrame><a:graphic><a:graphicData><a:tbl>{rows}</a:tbl></a:graphicData></a:graphic></p:graphicFrame>"
                if table
                else ""
            )
            z.writestr(
                f"ppt/slides/slide{count - n}.xml",
                f'<p:sld xmlns:p="{_P}" xmlns:a="{_A}"><p:cSld><p:spTree>'
                f"<p:sp><p:txBody><a:p><a:r><a:t>{title}</a:t></a:r></a:p></p:txBody></p:sp>"
                f"{grid}</p:spTree></p:cSld></p:sld>",
            )
    return path


def epub(path: Path, chapters: list[tuple[str, str]]) -> Path:
    """An EPUB with one XHTML file per (title, paragraph), in spine order."""
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("mimetype", "application/epub+zip")
        z.writestr(
            "META-INF/container.xml",
            '<container xmlns="urn:oasis:names:tc:opendocument:xmlns:container" version="1.0">'
            '<rootfiles><rootfile full-path="OEBPS/content.opf" '
            'media-type="application/oebps-package+xml"/></rootfiles></container>',
        )
        items = "".join(
            f'<item id="c{n}" href="text/c{n}.xhtml" media-type="application/xhtml+xml"/>'
            for n in range(len(chapters))
        )
        spine = "".join(f'<itemref idref="c{n}"/>' for n in range(len(chapters)))
        z.writestr(
            "OEBPS/content.opf",
            '<package xmlns="http://www.idpf.org/2007/opf" version="3.0">'
            f"<manifest>{items}</manifest><spine>{spine}</spine></package>",
        )
        for n, (title, paragraph) in enumerate(chapters):
            z.writestr(
                f"OEBPS/text/c{n}.xhtml",
                '<html xmlns="http://www.w3.org/1999/xhtml"><head><title>'
                f"{title}</title></head><body><h1>{title}</h1><p>{paragraph}</p></body></html>",
            )
    return path
