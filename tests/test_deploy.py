"""Running Switchboard as a service and in a container: the systemd unit (checked by
``systemd-analyze verify``), the launchd agent, and the Docker files (no Docker engine runs
here, so they are read, not built)."""

from __future__ import annotations

import asyncio
import plistlib
import re
import shutil
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from gateway.cli.service import launchd_plist
from gateway.config.settings import Settings
from tests.fakes.llm import FakeLLM
from tests.test_cli import cli_env, switchboard

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
async def test_service_install_writes_a_unit_systemd_accepts(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    if sys.platform == "darwin":
        pytest.skip("macOS installs a launchd agent (checked below)")
    home = tmp_path / "my home"  # a space: the unit must quote paths
    env = cli_env(home, fake_llm, XDG_CONFIG_HOME=str(tmp_path / "config"))
    code, out, err = await switchboard("service", "install", "--no-start", env=env)
    assert code == 0, err
    unit = tmp_path / "config" / "systemd" / "user" / "switchboard.service"
    assert f"wrote    {unit}" in out
    assert "systemctl --user enable --now switchboard.service" in out
    assert "SWITCHBOARD_LLM__BASE_URL" in out  # this shell's settings will not be there
    text = unit.read_text()
    assert "Restart=on-failure" in text
    assert f'Environment="SWITCHBOARD_HOME={home.resolve()}"' in text
    assert f'ExecStart="{sys.executable}" -m gateway run' in text
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze is not installed (apt-get install systemd)")
    # System mode: the user mode needs a running user manager, which a CI container lacks.
    process = await asyncio.create_subprocess_exec(
        analyze, "verify", str(unit), stderr=asyncio.subprocess.PIPE
    )
    _, errors = await asyncio.wait_for(process.communicate(), 60)
    assert process.returncode == 0, errors.decode()
    assert errors.decode().strip() == ""
    code, out, _ = await switchboard("service", "uninstall", env=env)
    assert not unit.exists()


def test_the_launchd_agent_restarts_on_failure(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path / "home")
    agent = plistlib.loads(launchd_plist(settings, python="/opt/py/bin/python").encode())
    assert agent["ProgramArguments"] == ["/opt/py/bin/python", "-m", "gateway", "run"]
    assert agent["KeepAlive"] == {"SuccessfulExit": False}  # restarted unless it exited 0
    assert agent["RunAtLoad"] is True
    assert agent["EnvironmentVariables"]["SWITCHBOARD_HOME"] == str(settings.home)


# -- Docker -------------------------------------------------------------------------------


def test_the_build_context_leaves_out_venvs_tests_and_secrets() -> None:
    lines = (ROOT / ".dockerignore").read_text().splitlines()
    ignored = {line.strip() for line in lines if line.strip() and not line.startswith("#")}
    assert {".venv", ".git", "tests", ".env", "bench", "docs"} <= ignored
    for needed in ("pyproject.toml", "README.md", "constraints.txt", "gateway", "agent"):
        assert needed not in ignored


def test_the_image_is_pinned_sandboxed_and_health_checked() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert "--constraint constraints.txt" in dockerfile
    assert re.search(r"apt-get install[^\n]*bubblewrap", dockerfile)
    assert re.search(r"apt-get install[^\n]*chromium", dockerfile)  # web_fetch renders pages
    assert '".[browser,matrix]"' in dockerfile  # drives them with Playwright; Matrix's client
    assert "HEALTHCHECK" in dockerfile and "/healthz" in dockerfile
    assert "USER switchboard" in dockerfile


def test_constraints_pin_every_dependency() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pinned = {
        re.split(r"==", line)[0].lower().replace("_", "-")
        for line in (ROOT / "constraints.txt").read_text().splitlines()
        if "==" in line
    }
    wanted = {
        re.split(r"[<>=!\[ ]", dependency)[0].lower().replace("_", "-")
        for dependency in project["dependencies"]
    }
    assert wanted - pinned == set()


def test_the_compose_file_runs_the_image_with_its_volume_and_sandbox() -> None:
    compose = yaml.safe_load((ROOT / "compose.yaml").read_text())
    service = compose["services"]["switchboard"]
    assert service["build"] == "."
    assert "switchboard-data:/data" in service["volumes"]
    assert "switchboard-data" in compose["volumes"]
    assert service["ports"] == ["127.0.0.1:8787:8787"]  # this machine only
    assert service["environment"]["SWITCHBOARD_WEB__HOST"] == "0.0.0.0"
    assert service["env_file"] == ".env"  # where SWITCHBOARD_WEB__TOKEN goes
    assert {"seccomp=unconfined", "apparmor=unconfined"} <= set(service["security_opt"])
    assert service["restart"] == "unless-stopped"
