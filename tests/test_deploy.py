"""Running Switchboard as a service and in a container: the systemd unit (checked by
``systemd-analyze verify``), the launchd agent, and the Docker files (no Docker engine runs
here, so they are read, not built)."""

from __future__ import annotations

import asyncio
import os
import plistlib
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import yaml

from gateway.cli.service.command import launchd_plist
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
    # not restarted every 5 s forever on what a person must fix: the configuration (2), the
    # store (5, newer or damaged), a package not installed (6), a port taken (7)
    assert "RestartPreventExitStatus=2 5 6 7" in text
    assert "ExecReload=/bin/kill -HUP $MAINPID" in text  # systemctl --user reload: new config
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


def test_the_launchd_agent_restarts_on_a_crash_only(tmp_path: Path) -> None:
    """launchd has no list of exit statuses not to restart on: the agent keeps the gateway
    running while the stopped file that `switchboard run` writes on those is absent
    (tests/test_exit_codes.py runs it); before, `SuccessfulExit = false` restarted every
    failure, a configuration error too, every few seconds."""
    settings = Settings(home=tmp_path / "home")
    agent = plistlib.loads(launchd_plist(settings, python="/opt/py/bin/python").encode())
    assert agent["ProgramArguments"] == ["/opt/py/bin/python", "-m", "gateway", "run"]
    stopped = str(settings.data_dir / "launchd-stopped")
    assert agent["KeepAlive"] == {"PathState": {stopped: False}}  # alive while it is absent
    assert agent["EnvironmentVariables"]["SWITCHBOARD_STOPPED_FILE"] == stopped
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


def test_the_runtime_stage_has_every_library_the_browser_driver_needs() -> None:
    """Playwright drives Chromium through the node binary it bundles; every shared library
    that binary links against must come from a package the runtime stage installs (or the
    base image's C library), else no page renders in the container."""
    ldd, dpkg = shutil.which("ldd"), shutil.which("dpkg")
    try:
        import playwright
    except ImportError:
        pytest.skip("Playwright is not installed (pip install -e '.[browser]')")
    node = Path(playwright.__file__).parent / "driver" / "node"
    if ldd is None or dpkg is None or not node.exists():
        pytest.skip("needs ldd, dpkg and Playwright's bundled node")
    linked = subprocess.run([ldd, str(node)], capture_output=True, text=True, check=True).stdout
    paths = [os.path.realpath(p) for p in re.findall(r"=> (/\S+)", linked)]
    owners = subprocess.run(
        [dpkg, "-S", *paths], capture_output=True, text=True, check=False
    ).stdout
    packages = {line.split(":")[0] for line in owners.splitlines() if ":" in line}
    dockerfile = (ROOT / "Dockerfile").read_text()
    runtime = dockerfile[dockerfile.rindex("FROM ") :]
    install = re.search(r"apt-get install -y --no-install-recommends([^&]*)", runtime)
    assert install is not None
    installed = set(install.group(1).replace("\\", " ").split())
    base = {"libc6", "libgcc-s1"}  # in every Debian image
    assert "libatomic1" in packages  # what the issue found missing
    assert packages - base <= installed, packages - base - installed


def _smoke(tmp_path: Path, *args: str, engine_works: bool | None) -> tuple[int, str]:
    """scripts/container-smoke with only a fake engine (or none) on PATH."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    for tool in ("bash", "env", "mktemp", "rm", "tr", "timeout", "cat", "python3", "dirname"):
        found = shutil.which(tool)
        if found is not None and not (bin_dir / tool).exists():
            (bin_dir / tool).symlink_to(found)
    if engine_works is not None:
        fake = bin_dir / "docker"
        fake.write_text(
            "#!/bin/sh\n"
            f'if [ "$1" = info ]; then exit {0 if engine_works else 1}; fi\n'
            'if [ "$1" = pull ]; then echo "dial tcp: lookup registry: no such host" >&2; '
            "exit 1; fi\n"
            "exit 1\n"
        )
        fake.chmod(0o755)
    process = subprocess.run(
        [str(bin_dir / "bash"), str(ROOT / "scripts" / "container-smoke"), *args],
        capture_output=True,
        text=True,
        env={"PATH": str(bin_dir)},
        timeout=60,
        check=False,
    )
    return process.returncode, process.stdout + process.stderr


def test_container_smoke_says_why_it_cannot_run_here(tmp_path: Path) -> None:
    code, out = _smoke(tmp_path, engine_works=None)
    assert code == 77 and "skipped: neither podman nor docker is installed" in out
    code, out = _smoke(tmp_path, engine_works=False)
    assert code == 77 and "docker is installed, but `docker info` fails" in out
    code, out = _smoke(tmp_path, engine_works=True)
    assert code == 77
    assert "cannot pull python:3.11-slim-bookworm (no container registry reachable" in out
    code, out = _smoke(tmp_path, "--require", engine_works=True)
    assert code == 1 and "skipped" in out  # where CI must run it, a skip fails


def test_the_home_files_readme_writes_are_never_committed() -> None:
    """README's Docker recipe writes the web token and the API key into .env."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    for path in (".env", "secrets/SWITCHBOARD_LLM__API_KEY"):
        ignored = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", path], check=False)
        assert ignored.returncode == 0, f"{path} is not git-ignored"


@pytest.mark.skipif(sys.platform == "darwin", reason="systemd only")
async def test_service_install_without_a_user_session_explains_and_leaves_nothing(
    tmp_path: Path, fake_llm: FakeLLM
) -> None:
    """A container or SSH without a login session: `systemctl --user` cannot reach a user
    manager. The install says why and what else to do, and writes no unit."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    systemctl = bin_dir / "systemctl"
    systemctl.write_text(
        "#!/bin/sh\necho 'Failed to connect to bus: No medium found' >&2\nexit 1\n"
    )
    systemctl.chmod(0o755)
    env = cli_env(
        tmp_path / "home",
        fake_llm,
        XDG_CONFIG_HOME=str(tmp_path / "config"),
        PATH=f"{bin_dir}:{os.environ['PATH']}",
        USER="dana",
    )
    code, _, err = await switchboard("service", "install", env=env)
    assert code == 1
    assert "there is no systemd user session" in err
    assert "Failed to connect to bus: No medium found" in err
    assert "sudo loginctl enable-linger dana" in err and "--no-start" in err
    assert not (tmp_path / "config" / "systemd" / "user" / "switchboard.service").exists()
