"""DESIGN.md "Layers": imports point down only. Read from the source (every import, lazy ones
inside functions included), so a new upward import fails here rather than in review."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "claudex"

# layer -> the claudex packages and modules it must never import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "providers": ("claudex.engine", "claudex.server", "claudex.console", "claudex.cli"),
    "engine": ("claudex.server", "claudex.console", "claudex.cli", "textual"),
    "config": ("claudex.engine", "claudex.server", "claudex.console", "claudex.cli"),
    "server": ("claudex.console", "claudex.cli"),
}


def imported_modules(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


@pytest.mark.parametrize("layer", sorted(FORBIDDEN))
def test_no_layer_imports_upwards(layer: str) -> None:
    upward = []
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        for line, module in imported_modules(path):
            if any(module == bad or module.startswith(bad + ".") for bad in FORBIDDEN[layer]):
                upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {module}")
    assert upward == []


def test_the_check_sees_a_lazy_import_inside_a_function(tmp_path: Path) -> None:
    source = tmp_path / "m.py"
    source.write_text("def f():\n    from claudex.cli import CliError\n    return CliError\n")
    assert imported_modules(source) == [(2, "claudex.cli")]


def _module_name(path: Path) -> str:
    name = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    return name.removesuffix(".__init__")


def engine_import_cycles() -> list[list[str]]:
    """Circles of imports among the engine's modules, counting every import: at the top, inside
    a function and under TYPE_CHECKING (a circle of types is still a circle to read)."""
    modules = {_module_name(p): p for p in (PACKAGE / "engine").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for _line, module in imported_modules(path):
            targets.add(module)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):  # `from claudex.engine.core import hooks` names a module
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets.update(f"{node.module}.{alias.name}" for alias in node.names)
        graph[name] = {t for t in targets if t in modules and t != name}
    cycles: list[list[str]] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycles.append([*path[path.index(nxt):], nxt])
            elif nxt not in state:
                visit(nxt)
        path.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
    return cycles


def test_no_circle_of_imports_inside_the_engine() -> None:
    assert [" -> ".join(c) for c in engine_import_cycles()] == []
