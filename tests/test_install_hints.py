"""Install hints give the command that fits how Switchboard was installed: the clone's own
venv for an editable install (the way README installs it), pipx or uv for a tool install,
the environment's pip otherwise."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gateway.cli.doctor.tools import browser_check
from gateway.core.system.install import Installation, installation
from tests.conftest import SettingsFactory

ROOT = Path(__file__).resolve().parents[1]
VENV = Path(sys.prefix)
PIP = ".venv/bin/pip" if VENV == ROOT / ".venv" else str(VENV / "bin" / "pip")


async def test_doctor_names_the_clones_own_pip_for_the_browser(
    make_settings: SettingsFactory, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """This checkout is installed editable (make, pip install -e .): doctor's browser hint
    is the clone's pip with `-e '.[browser]'`, run in the clone."""
    settings = make_settings(tools={"web": {"browser_path": "/nonexistent/chromium"}})
    monkeypatch.chdir(tmp_path)  # run from elsewhere: the hint goes to the clone first
    [check] = await browser_check(settings)
    assert check.status == "warn"
    assert f"Playwright (cd {ROOT} && {PIP} install -e '.[browser]')" in check.message
    assert "pip install 'switchboard[browser]'" not in check.message
    monkeypatch.chdir(ROOT)
    assert installation().command("matrix") == f"{PIP} install -e '.[matrix]'"


@pytest.mark.parametrize(
    ("marker", "command"),
    [
        ("pipx_metadata.json", f"pipx install --force '{ROOT}[browser]'"),
        ("uv-receipt.toml", f"uv tool install --force '{ROOT}[browser]'"),
    ],
)
def test_a_tool_install_from_the_clone_is_reinstalled_with_the_extra(
    tmp_path: Path, marker: str, command: str
) -> None:
    """``pipx install .`` / ``uv tool install .`` (README): their virtualenv says which."""
    (tmp_path / marker).write_text("{}")
    assert installation(tmp_path).command("browser") == command


def test_a_regular_install_uses_its_own_environments_pip() -> None:
    image = Installation("pip", Path("/opt/switchboard"))
    assert image.command("browser") == (
        "/opt/switchboard/bin/python -m pip install 'switchboard[browser]'"
    )
