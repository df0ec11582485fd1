"""The layering rules, checked on the source.

``gateway/`` has layers; each may import only the layers listed for it here (its own package
always). ``channels/`` and ``agent/`` never import each other, and take from the gateway only
the kernel, the configuration and the store's types. Every import counts, including those
under ``TYPE_CHECKING`` and inside functions: a cycle hidden behind one is still a cycle.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gateway", "channels", "agent")

# layer -> the layers it may import (besides itself)
ALLOWED: dict[str, set[str]] = {
    "gateway": set(),  # gateway/__init__.py: the version, importable from every layer
    "gateway.core": set(),
    "gateway.config": {"gateway.core"},
    "gateway.store": {"gateway.core"},
    "gateway.web": {"gateway.core", "gateway.config", "gateway.store"},
    "channels": {"gateway.core", "gateway.config", "gateway.store"},
    "agent": {"gateway.core", "gateway.config", "gateway.store"},
    "gateway.runtime": {
        "gateway.core",
        "gateway.config",
        "gateway.store",
        "gateway.web",
        "channels",
        "agent",
    },
    "gateway.cli": {
        "gateway.core",
        "gateway.config",
        "gateway.store",
        "gateway.web",
        "gateway.runtime",
        "channels",
        "agent",
    },
    "gateway.__main__": {"gateway.cli"},
}
for _allowed in ALLOWED.values():
    _allowed.add("gateway")


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def layer_of(module: str) -> str:
    return max(
        (layer for layer in ALLOWED if module == layer or module.startswith(layer + ".")), key=len
    )


@cache
def sources() -> dict[str, Path]:
    return {
        module_name(p): p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))
    }


@cache
def imports_of(module: str) -> frozenset[str]:
    """The project modules ``module`` imports (``from pkg import mod`` resolves to ``pkg.mod``)."""
    known = sources()
    tree = ast.parse(known[module].read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        else:
            continue
        for imported in names:
            if imported.split(".")[0] not in PACKAGES:
                continue
            name = imported
            while name and name not in known:  # a name imported from a module: the module
                name = name.rpartition(".")[0]
            if name:
                found.add(name)
    found.discard(module)
    return frozenset(found)


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_each_layer_imports_only_the_layers_below_it(layer: str) -> None:
    offenders = sorted(
        f"{module} imports {target}"
        for module in sources()
        if layer_of(module) == layer
        for target in imports_of(module)
        if layer_of(target) != layer and layer_of(target) not in ALLOWED[layer]
    )
    assert offenders == []


def test_the_import_graph_has_no_cycles() -> None:
    """Package ``__init__`` re-exports aside (a package may name what its modules hold)."""
    graph = {
        module: {t for t in imports_of(module) if not _is_parent_package(t, module)}
        for module in sources()
    }
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt) :], nxt])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module)
    assert cycles == []


def _is_parent_package(target: str, module: str) -> bool:
    return sources()[target].name == "__init__.py" and module.startswith(target + ".")


# An alarm, not a target: a module this long probably does more than one job. Split by
# responsibility when it rings, never only to get under the number.
LONG_MODULE_LINES = 800


def test_no_module_outgrows_its_job() -> None:
    too_long = {
        str(path.relative_to(ROOT)): n
        for path in sources().values()
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > LONG_MODULE_LINES
    }
    assert too_long == {}
