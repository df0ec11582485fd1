"""A scanned PDF's pages: drawn as pictures for a model that sees images, or read by OCR.

A scan holds no text, only images of its pages. A model that sees images is given those
pages as pictures; for one that does not, Tesseract (``apt install tesseract-ocr``, run as
a program: :func:`read_scan`, :func:`read_picture`) reads the words off them.

PDFium (pypdfium2, Chrome's PDF engine) draws each page in shades of grey, no larger than
:data:`MAX_SIDE` pixels on its longer side (about 100 dpi for A4: print is legible, and a
picture costs the prompt about 1,000 tokens, :data:`agent.tokens.IMAGE_TOKENS`, again in
every turn that still has it in its history). For OCR it draws at :data:`OCR_DPI`. All of
it runs in the document worker (:mod:`agent.documents.worker`) like every other read: the
gateway never parses the file, and the worker writes no file of its own; it answers with
the PNG bytes, or the words.

A grey picture is a PNG of three chunks (a header, the rows deflated, an end), written
here with :mod:`zlib` rather than bringing in an imaging library for it.
"""

from __future__ import annotations

import os
import struct
import subprocess
import time
import zlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import numpy as np
import pypdfium2 as pdfium

from agent.documents.formats import DocumentRefused, Extract, Request, add_part

PICTURE_DPI = 100  # a page's picture for a model: print legible, about 1,000 tokens
OCR_DPI = 200  # Tesseract reads body text best at 200 to 300 dpi
OCR_MAX_SIDE = 3_000
MAX_SIDE = 1_200  # pixels, the longer side of a page's picture (10 pt print: 15 pixels high)
POINTS_PER_INCH = 72  # a PDF's canvas unit


def page_pictures(
    path: str, pages: Sequence[int], *, max_side: int = MAX_SIDE
) -> tuple[int, list[tuple[int, bytes]]]:
    """Pages ``pages`` (1-based; those past the end left out) of the PDF at ``path`` as
    grey PNGs, each with its number, and the PDF's page count."""
    with _opened(path) as document:
        total = len(document)
        pictures = [
            (page, _page_png(document[page - 1], max_side)) for page in pages if 0 < page <= total
        ]
    return total, pictures


def read_pages(
    path: str, pages: Sequence[int], *, program: str, languages: str, seconds: float
) -> Iterator[tuple[int, str]]:
    """Pages ``pages`` of the PDF at ``path`` read by Tesseract (``program``, its path) in
    ``languages`` ("eng", "eng+deu"), in order, each with its number, for as long as
    ``seconds`` last: the caller stops taking them when it has enough."""
    deadline = time.monotonic() + seconds
    with _opened(path) as document:
        total = len(document)
        for page in pages:
            left = deadline - time.monotonic()
            if page > total or left <= 0:
                return
            png = _page_png(document[page - 1], OCR_MAX_SIDE, dpi=OCR_DPI)
            try:
                yield page, _tesseract(program, "-", languages, left, png)
            except subprocess.TimeoutExpired:
                return


def read_picture(path: str, *, program: str, languages: str, seconds: float) -> str:
    """The words in the picture at ``path`` (a photo of a page, a screenshot), read by
    Tesseract; ``""`` when it finds none."""
    try:
        return _tesseract(program, path, languages, seconds, b"")
    except subprocess.TimeoutExpired:
        raise DocumentRefused(f"reading its words took longer than {seconds:g} seconds") from None


def _tesseract(program: str, source: str, languages: str, seconds: float, data: bytes) -> str:
    """Tesseract's reading of ``source`` (a file, or ``-``: ``data``, a PNG)."""
    try:
        done = subprocess.run(
            [program, source, "-", "-l", languages],
            input=data,
            capture_output=True,
            timeout=seconds,
            check=False,
            env={**os.environ, "OMP_THREAD_LIMIT": "1"},  # its threads: 7x slower on 2 cores
        )
    except OSError as exc:
        raise DocumentRefused(f"OCR could not run ({exc.strerror or exc})") from exc
    if done.returncode != 0:
        said = done.stderr.decode(errors="replace").strip().splitlines()[-1:]
        raise DocumentRefused(f"OCR failed ({' '.join(said) or done.returncode})")
    return done.stdout.decode("utf-8", errors="replace").strip()


@contextmanager
def _opened(path: str) -> Iterator[Any]:
    """The PDF at ``path`` as PDFium opens it, closed after; one it cannot open is refused."""
    try:
        document = pdfium.PdfDocument(path)
    except pdfium.PdfiumError as exc:
        raise DocumentRefused(f"not a PDF that could be drawn ({exc})") from exc
    try:
        yield document
    finally:
        document.close()


def _page_png(page: Any, max_side: int, *, dpi: int = PICTURE_DPI) -> bytes:
    width, height = page.get_size()  # in points
    scale = min(dpi / POINTS_PER_INCH, max_side / max(width, height, 1.0))
    bitmap = page.render(scale=scale, grayscale=True)
    pixels = np.asarray(bitmap.to_numpy())
    if pixels.ndim == 3:  # drawn as BGR(A) even in grey: take one channel
        pixels = pixels[:, :, 0]
    return grey_png(np.ascontiguousarray(pixels, dtype=np.uint8))


def grey_png(pixels: np.ndarray[Any, np.dtype[np.uint8]]) -> bytes:
    """An 8-bit greyscale PNG of ``pixels`` (rows of bytes)."""
    height, width = pixels.shape
    rows = np.empty((height, width + 1), dtype=np.uint8)
    rows[:, 0] = 0  # each row unfiltered
    rows[:, 1:] = pixels
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"".join(
        (
            b"\x89PNG\r\n\x1a\n",
            _chunk(b"IHDR", header),
            _chunk(b"IDAT", zlib.compress(rows.tobytes(), 6)),
            _chunk(b"IEND", b""),
        )
    )


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def read_scan(request: Request, total: int) -> Extract | None:
    """A scan's pages read by OCR (``request.ocr``), as many as fit ``max_chars`` and the
    time given; ``None`` when Tesseract found no words on any page read."""
    assert request.ocr is not None
    program, languages = request.ocr
    out = Extract("pdf", "page", total, ocr=True)
    wanted = [page for page in request.pages or range(1, total + 1) if page <= total]
    read = read_pages(
        request.path, wanted, program=program, languages=languages, seconds=request.ocr_seconds
    )
    for page, text in read:
        if not add_part(out, f"page {page}", text, request.max_chars):
            break
    else:  # out of time before the pages were all read
        if out.parts and out.parts[-1][0] != f"page {wanted[-1]}":
            out.truncated_after = out.parts[-1][0]
    return out if any(text for _, text in out.parts) else None
