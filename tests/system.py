"""System packages some tests need (real mail servers, Chromium, bubblewrap), and the
summary at the end of a run that names the missing ones and the command that installs them.

A test that cannot run without a package skips with :func:`missing` in its reason; the
``pytest_terminal_summary`` hook (imported by tests/conftest.py) collects those skips.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterable
from typing import Any

import pytest

_TAG = "missing system package"
_FOUND = re.compile(rf"\[{_TAG}: ([^\]]+)\]")


def missing(*packages: str) -> str:
    """The tag to put in a skip reason: ``[missing system package: chromium]``."""
    return f"[{_TAG}: {' '.join(packages)}]"


def missing_packages(reports: Iterable[Any]) -> tuple[int, list[str]]:
    """How many skips were for a missing package, and which packages (first seen first)."""
    packages: dict[str, None] = {}
    skipped = 0
    for report in reports:
        match = _FOUND.search(str(getattr(report, "longrepr", "")))
        if match is None:
            continue
        skipped += 1
        packages.update(dict.fromkeys(match.group(1).split()))
    return skipped, list(packages)


def summary(reports: Iterable[Any]) -> list[str]:
    skipped, packages = missing_packages(reports)
    if not skipped:
        return []
    names = " ".join(packages)
    return [
        f"{skipped} test(s) skipped because system packages are missing: {names}",
        "Install them (Debian/Ubuntu) and run `make test` again:",
        f"    sudo apt-get install -y --no-install-recommends {names}",
    ]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    lines = summary(terminalreporter.stats.get("skipped", []))
    if lines:
        terminalreporter.section("missing system packages", yellow=True)
        for line in lines:
            terminalreporter.write_line(line, yellow=True)


def needs_tesseract() -> None:
    """Skip without Tesseract (OCR of scans), except under CI, which must run those tests."""
    if shutil.which("tesseract"):
        return
    if os.environ.get("CI"):
        pytest.fail("CI must run the OCR tests: tesseract is not installed")
    pytest.skip(f"Tesseract is not installed {missing('tesseract-ocr')}")
