"""The README is the front page: short, and every link in it leads to a file that is there (the
site's pages under docs/, the screenshots)."""

from __future__ import annotations

import re

from tests.paths import REPO

README = REPO / "README.md"


def test_the_readme_fits_on_two_screens() -> None:
    lines = README.read_text(encoding="utf-8").splitlines()
    assert len(lines) <= 120, f"README.md has {len(lines)} lines; move the detail into docs/"


def test_every_relative_link_in_the_readme_exists() -> None:
    text = README.read_text(encoding="utf-8")
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    relative = [t for t in targets if "://" not in t]
    assert relative, "the README should link into the docs"
    missing = [t for t in relative if not (REPO / t).is_file()]
    assert not missing
