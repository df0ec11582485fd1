"""The process that opens a document: ``python -m agent.documents.worker`` < request JSON.

It limits itself before it reads anything: address space (``memory_mb``), CPU seconds,
no file written (``RLIMIT_FSIZE`` 0, ``SIGXFSZ`` ignored so a write fails instead of
killing), few open files. A crafted PDF that loops or balloons ends here, with an exit
code the reader turns into a message; the gateway's own process never parses the file.
The answer is one JSON object on stdout: ``{"ok": extract}`` or ``{"error": message}``.
A request with ``"pictures": [page, ...]`` asks for those pages of a scanned PDF drawn instead
(:mod:`agent.documents.scans`): ``{"ok": {"total": pages, "pictures": [[page, base64
PNG], ...]}}``; one with ``"words_of": path`` for the words in a picture, read by OCR
(``{"ok": {"text": ...}}``).
"""

from __future__ import annotations

import base64
import json
import resource
import signal
import sys
from typing import Any

from agent.documents.formats import DocumentRefused, Request, extract
from agent.documents.scans import page_pictures, read_picture, read_scan

_MB = 1024 * 1024


def limit(*, memory_mb: int, cpu_seconds: int) -> None:
    resource.setrlimit(resource.RLIMIT_AS, (memory_mb * _MB, memory_mb * _MB))
    resource.setrlimit(resource.RLIMIT_CPU, (cpu_seconds, cpu_seconds + 1))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NOFILE, (32, 32))


def main() -> int:
    spec: dict[str, Any] = json.loads(sys.stdin.read())
    limit(memory_mb=int(spec.pop("memory_mb")), cpu_seconds=int(spec.pop("cpu_seconds")))
    spec["pages"] = tuple(spec.get("pages") or ())
    if spec.get("ocr"):
        spec["ocr"] = tuple(spec["ocr"])
    try:
        answer: dict[str, Any] = {"ok": _answer(spec)}
    except DocumentRefused as exc:
        answer = {"error": str(exc)}
    except MemoryError:
        answer = {"error": "reading it needed more memory than documents may use"}
    except RecursionError:
        answer = {"error": "the file is nested too deeply to read (damaged or crafted)"}
    except Exception as exc:  # any parser's failure on a hostile file is that file's fault
        answer = {"error": f"it could not be read ({type(exc).__name__}: {exc})"}
    sys.stdout.write(json.dumps(answer))
    return 0


def _answer(spec: dict[str, Any]) -> dict[str, Any]:
    if spec.get("words_of") is not None:  # a picture's words, by OCR
        program, languages = spec["ocr"]
        return {
            "text": read_picture(
                spec["words_of"], program=program, languages=languages, seconds=spec["ocr_seconds"]
            )
        }
    pages = spec.pop("pictures", None)
    if pages is None:
        request = Request(**spec)
        out = extract(request)
        if out.no_text_layer and request.ocr is not None:  # a scan: its words, by OCR
            out = read_scan(request, out.total) or out
        return out.to_dict()
    total, pictures = page_pictures(spec["path"], [int(page) for page in pages])
    return {
        "total": total,
        "pictures": [[page, base64.b64encode(png).decode()] for page, png in pictures],
    }


if __name__ == "__main__":
    sys.exit(main())
