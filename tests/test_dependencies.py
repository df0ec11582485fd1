"""What pyproject.toml declares matches what the code imports and the APIs it calls."""

from __future__ import annotations

import ast
import sys
import tomllib
from importlib.metadata import packages_distributions, version
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from agent.tokens import TokenCounter

ROOT = Path(__file__).resolve().parent.parent
OURS = {"agent", "gateway", "channels"}


def declared(*, extras: bool = False) -> dict[str, Requirement]:
    """The install requirements, and with ``extras`` the optional features' too (the
    browser's Playwright; not the developer tools)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    lines = list(project["dependencies"])
    if extras:
        optional = project.get("optional-dependencies", {})
        lines += [r for name, group in optional.items() if name != "dev" for r in group]
    requirements = [Requirement(r) for r in lines]
    return {canonicalize_name(r.name): r for r in requirements}


def imported_modules() -> set[str]:
    found: set[str] = set()
    for package in OURS:
        for path in (ROOT / package).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Import):
                    found.update(alias.name.split(".")[0] for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    found.add(node.module.split(".")[0])
    return found - OURS - set(sys.stdlib_module_names) - {"__future__"}


def test_every_imported_package_is_declared_directly() -> None:
    """A module we import only because another package happens to pull it in breaks the day
    that package stops (or an old pip resolves it differently)."""
    owners = packages_distributions()
    names = declared(extras=True)
    missing = {
        module: owners.get(module)
        for module in imported_modules()
        if not any(canonicalize_name(d) in names for d in owners.get(module, []))
    }
    assert missing == {}
    # web_fetch's HTML extraction needs lxml.html.clean, which justext asks for through an
    # extra that pip 23 (a fresh venv's) does not match: it is named directly.
    assert "lxml-html-clean" in names
    unused = {"apscheduler", "bpe-openai"} & set(names)
    assert unused == set()


def test_sdk_floors_and_pins_follow_what_we_call() -> None:
    names = declared()
    # DefaultAioHttpClient, which both providers use, and its aiohttp extra.
    assert names["openai"].extras == {"aiohttp"} and "1.89" in names["openai"].specifier
    assert not names["openai"].specifier.contains("1.88.0")
    assert names["anthropic"].extras == {"aiohttp"}
    assert not names["anthropic"].specifier.contains("0.54.0")
    # discord.py: we subclass its internals, so the next minor is not accepted unchecked.
    installed = Version(version("discord.py"))
    discord = names["discord-py"].specifier
    assert discord.contains(str(installed))
    assert not discord.contains(f"{installed.major}.{installed.minor + 1}.0")
    # python-telegram-bot: we use neither its rate limiter nor its tornado webhook server.
    assert names["python-telegram-bot"].extras == set()


def test_tokens_are_counted_exactly_without_a_download(tmp_path: Path) -> None:
    counter = TokenCounter(cache_dir=tmp_path)
    assert counter.load() and counter.exact
    assert counter.count("hello world") == 2
