"""The generated pages: which file each is, what it is made from, and writing or checking them.

`render_all(root)` is every page as the build would write it; `write(root)` writes the ones
that differ (so a build changes no file it need not), `stale(root)` names the ones in the
repository that differ from what the build would write, or should not be there.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from claudex.docs_gen import (
    cli_page,
    config_page,
    console_page,
    drops_page,
    metrics_page,
    policy_page,
)
from claudex.docs_gen.markdown import banner, code, table

REFERENCE_DIR = Path("docs") / "reference"
REGENERATE = "make docs-gen"


@dataclass(frozen=True)
class Page:
    file: str                 # under docs/reference/
    title: str
    sources: tuple[str, ...]  # what it is generated from, shown on the page
    render: Callable[[Path], str]


PAGES: tuple[Page, ...] = (
    Page("failures.md", "Failure table", policy_page.SOURCES, lambda _: policy_page.render()),
    Page("config.md", "Configuration keys", config_page.SOURCES, config_page.render),
    Page("console-keys.md", "Console keys", console_page.SOURCES,
         lambda _: console_page.render()),
    Page("cli.md", "Command line", cli_page.SOURCES, lambda _: cli_page.render()),
    Page("translation-drops.md", "Translation drop tables", drops_page.SOURCES,
         lambda _: drops_page.render()),
    Page("metrics.md", "Metrics", metrics_page.SOURCES, lambda _: metrics_page.render()),
)
INDEX = "index.md"


def _index() -> str:
    rows = [[f"[{page.title}]({page.file})", ", ".join(code(s) for s in page.sources)]
            for page in PAGES]
    return "\n".join((
        "# Reference", "",
        "These pages are generated from the code's own tables by `make docs-gen` (and by every "
        "`make docs`), so they cannot disagree with it. The copies in the repository are "
        "checked by `tests/docs/test_generated_pages.py`.", "",
        table(("page", "generated from"), rows), ""))


def render_all(root: Path) -> dict[str, str]:
    """File name under docs/reference/ -> its text."""
    pages = {page.file: banner(page.sources, REGENERATE) + "\n" + page.render(root)
             for page in PAGES}
    pages[INDEX] = banner(("claudex/docs_gen/pages.py",), REGENERATE) + "\n" + _index()
    return {name: text.rstrip("\n") + "\n" for name, text in pages.items()}


def write(root: Path) -> list[str]:
    """Write every page that differs from what is on disk; returns their paths."""
    directory = root / REFERENCE_DIR
    directory.mkdir(parents=True, exist_ok=True)
    changed = []
    for name, text in render_all(root).items():
        path = directory / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
            changed.append(str(REFERENCE_DIR / name))
    return changed


def stale(root: Path) -> list[str]:
    """Paths under docs/reference/ that differ from what `write` would leave there: a page out
    of date or missing, or a file no page writes."""
    directory = root / REFERENCE_DIR
    expected = render_all(root)
    found = []
    for name, text in expected.items():
        path = directory / name
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            found.append(str(REFERENCE_DIR / name))
    if directory.is_dir():
        found += [str(REFERENCE_DIR / p.name) for p in sorted(directory.iterdir())
                  if p.name not in expected]
    return found
