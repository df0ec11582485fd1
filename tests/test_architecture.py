"""The dependency rule, checked on the source: channels and agent never import each other."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The wiring modules: the only places in gateway/ that know the agent or the channels.
WIRING = {
    "gateway/app.py",
    "gateway/assembly.py",
    "gateway/cli.py",
    "gateway/conversation.py",
    "gateway/doctor.py",
    "gateway/subagents.py",
}


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
    return names


def sources(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize(("package", "forbidden"), [("channels", "agent"), ("agent", "channels")])
def test_channels_and_agent_never_import_each_other(package: str, forbidden: str) -> None:
    offenders = [
        str(p.relative_to(ROOT)) for p in sources(package) if forbidden in imported_packages(p)
    ]
    assert offenders == []


def test_gateway_core_knows_neither_agent_nor_channels() -> None:
    offenders = []
    for path in sources("gateway"):
        relative = str(path.relative_to(ROOT))
        if relative not in WIRING and imported_packages(path) & {"agent", "channels"}:
            offenders.append(relative)
    assert offenders == []


def test_no_module_outgrows_its_job() -> None:
    too_long = {
        str(p.relative_to(ROOT)): n
        for package in ("gateway", "channels", "agent")
        for p in sources(package)
        if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400
    }
    assert too_long == {}
