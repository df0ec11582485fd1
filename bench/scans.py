"""Benchmark: what a scanned PDF costs before its turn starts.

Run from the repository root: ``python -m bench.scans [--pages 4] [--runs 3]``.

A scan as a scanner makes it (tests/documents.py ``scanned_pdf``: each page only an image of
a full page of text, 45 lines of 11 pt, drawn at 200 dpi in grey) is read the two ways the gateway reads one, each through the
real document worker (a process of its own, with its limits), each from a fresh copy:

* drawn: its first ``--pages`` pages as pictures for a model that sees images
  (``DocumentReader.draw``), with the size of the pictures;
* read by OCR (Tesseract, which must be installed), for a model that sees no images: the
  read a message makes before it is journaled (what fits it, 5 seconds of OCR at most),
  and ``read_file``'s (12,000 characters), with the pages and words read;

and, beside them, the read of the same text as a PDF with a text layer. Printed: the median
wall time of ``--runs`` runs for each.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from agent.documents.reader import DocumentReader
from gateway.config.media import DocumentSettings
from gateway.runtime.intake.understanding import CHARS_PER_TOKEN, INTAKE_OCR
from tests import documents

ROWS = 45  # lines on a page: a letter's page of 11 pt text
PAGE = "\n".join(
    f"{n}. The tenant pays 850 EUR rent on the first day of each month, by transfer."
    for n in range(1, ROWS + 1)
)


INLINE_CHARS = DocumentSettings().inline_tokens * CHARS_PER_TOKEN  # goes with a message


async def timed(runs: int, make: Callable[[Path], Awaitable[object]], data: bytes) -> float:
    """The median seconds of ``make`` on a fresh copy of ``data`` (nothing drawn before)."""
    times = []
    for _ in range(runs):
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / "scan.pdf"
            path.write_bytes(data)
            began = time.perf_counter()
            await make(path)
            times.append(time.perf_counter() - began)
    return statistics.median(times)


async def main(pages: int, runs: int) -> None:
    settings = DocumentSettings()
    scan = documents.scanned_pdf([PAGE] * pages)
    text = documents.pdf([PAGE] * pages)
    plain = DocumentReader(settings)
    print(f"a scan of {pages} pages ({len(scan) / 1000:.0f} kB), {runs} runs, medians:")

    async def draw(path: Path) -> object:
        drawn = await plain.draw(path, range(1, pages + 1))
        sizes = [p.stat().st_size for p in drawn]
        print(f"  (drew {len(drawn)} pictures, {sum(sizes) / len(sizes) / 1000:.0f} kB each)")
        return drawn

    print(f"drawn as pictures:             {await timed(runs, draw, scan):6.2f} s")
    reader = DocumentReader(settings, sees_images=lambda: False)
    if reader.ocr is None:
        print("read by OCR: (Tesseract is not installed: apt install tesseract-ocr)")
    else:

        def reading(**limits: Any) -> Callable[[Path], Awaitable[object]]:
            async def read(path: Path) -> object:
                done = await reader.read(path, "pdf", **limits)
                words = sum(len(t.split()) for _, t in done.extract.parts)
                print(f"  (read {len(done.extract.parts)} pages, {words} words)")
                return done

            return read

        intake = reading(max_chars=INLINE_CHARS + 1, ocr_seconds=INTAKE_OCR)
        print(f"read by OCR, with the message: {await timed(runs, intake, scan):6.2f} s")
        print(f"read by OCR, by read_file:     {await timed(runs, reading(), scan):6.2f} s")
    text_read = await timed(runs, lambda path: plain.read(path, "pdf"), text)
    print(f"the same with a text layer:    {text_read:6.2f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pages", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.pages, args.runs))
