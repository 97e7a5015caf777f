"""DESIGN.md "Layers": imports point down only. Read from the source (every import, lazy ones
inside functions included), so a new upward import fails here rather than in review."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "claudex"

# layer -> the claudex packages and modules it must never import
FORBIDDEN: dict[str, tuple[str, ...]] = {
    "providers": ("claudex.engine", "claudex.server", "claudex.console", "claudex.cli",
                  "claudex.text", "claudex.demo"),
    "engine": ("claudex.server", "claudex.console", "claudex.cli", "claudex.text", "claudex.demo",
               "textual"),
    "config": ("claudex.engine", "claudex.server", "claudex.console", "claudex.cli",
               "claudex.text", "claudex.demo"),
    "server": ("claudex.console", "claudex.cli"),
    # The words the console and the command line share (`claudex/text/`): below both.
    "text": ("claudex.server", "claudex.console", "claudex.cli", "claudex.demo", "textual"),
    "demo": ("claudex.console", "claudex.cli"),
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


def _module_name(path: Path, root: Path) -> str:
    name = ".".join(path.relative_to(root.parent).with_suffix("").parts)
    return name.removesuffix(".__init__")


def import_graph(root: Path) -> dict[str, set[str]]:
    """Each module of the package at `root` -> the package's modules it imports, counting every
    import: at the top, inside a function and under TYPE_CHECKING (a circle of types is still a
    circle to read). `from package import name` is an import of the module `package.name` when
    there is one (a sibling named through its package), else of `package` itself."""
    modules = {_module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        targets: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    targets.add(submodule if submodule in modules else node.module)
        graph[name] = {t for t in targets if t in modules and t != name}
    return graph


def import_cycles(root: Path) -> list[list[str]]:
    """Circles of imports among the modules of the package at `root`: one per edge that leads
    back to a module still being walked (none at all when there is no circle)."""
    graph = import_graph(root)
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


def test_no_circle_of_imports_anywhere_in_claudex() -> None:
    assert [" -> ".join(c) for c in import_cycles(PACKAGE)] == []


def test_the_circle_check_sees_a_circle_of_two_and_one_through_a_lazy_import(
        tmp_path: Path) -> None:
    package = tmp_path / "pkg"
    (package / "inner").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "inner" / "__init__.py").write_text("")
    (package / "a.py").write_text("from pkg.b import f\n")
    (package / "b.py").write_text("def f():\n    from pkg import a\n    return a\n")
    (package / "inner" / "c.py").write_text("from typing import TYPE_CHECKING\n"
                                            "if TYPE_CHECKING:\n    from pkg.inner.d import D\n")
    (package / "inner" / "d.py").write_text("from pkg.inner import c\nclass D: ...\n")
    assert import_cycles(package) == [["pkg.a", "pkg.b", "pkg.a"],
                                      ["pkg.inner.c", "pkg.inner.d", "pkg.inner.c"]]


def test_a_sibling_named_through_its_package_is_no_circle(tmp_path: Path) -> None:
    """`pkg/__init__.py` re-exporting from `pkg.pages`, which takes its siblings as
    `from pkg import one`, imports no module that imports it back."""
    package = tmp_path / "pkg"
    package.mkdir()
    (package / "__init__.py").write_text("from pkg.pages import render\n")
    (package / "one.py").write_text("def page(): ...\n")
    (package / "pages.py").write_text("from pkg import one\ndef render(): return one.page()\n")
    assert import_graph(package)["pkg.pages"] == {"pkg.one"}
    assert import_cycles(package) == []
