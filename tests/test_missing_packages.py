"""A test run on a machine without the mail servers, Chromium or bubblewrap says at the end
which system packages are missing and the one command that installs them."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
async def test_skips_for_missing_packages_end_with_the_install_command(tmp_path: Path) -> None:
    (tmp_path / "conftest.py").write_text(
        "from tests.system import pytest_terminal_summary  # noqa: F401\n"
    )
    (tmp_path / "test_needs_packages.py").write_text(
        "import pytest\n"
        "from tests.system import missing\n\n"
        "def test_mail():\n"
        '    pytest.skip(f\'dovecot is not installed {missing("dovecot-imapd", "opensmtpd")}\')\n\n'
        "def test_browser():\n"
        "    pytest.skip(f'Chromium is not installed {missing(\"chromium\")}')\n\n"
        "def test_other():\n"
        "    pytest.skip('not on Tuesdays')\n"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "--rootdir",
        str(tmp_path),
        str(tmp_path),
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=asyncio.subprocess.PIPE,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 60)
    text = out.decode()
    assert process.returncode == 0, text
    assert "2 test(s) skipped because system packages are missing: " in text
    assert text.rstrip().splitlines()[-2].strip() == (
        "sudo apt-get install -y --no-install-recommends dovecot-imapd opensmtpd chromium"
    )
