"""The reference pages under docs/reference/ are generated from the code (claudex/docs_gen): the
committed copies must be what `make docs-gen` would write now, and everything the generator
reads must have its words, so that a new key, policy row or console screen cannot reach main
undocumented."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest

import claudex.console
from claudex.config import _checks
from claudex.docs_gen import REGENERATE, config_page, console_page, pages, stale, write
from claudex.docs_gen.__main__ import main as docs_gen_main
from claudex.engine.core.policy import POLICY, WHEN
from tests.paths import REPO


def test_the_committed_pages_are_what_the_code_writes() -> None:
    differing = stale(REPO)
    assert not differing, (
        f"{', '.join(differing)} differ from what the code would write: run `{REGENERATE}` "
        "and commit the result")


def test_every_config_key_has_its_words_in_the_example_file() -> None:
    missing = config_page.undescribed(REPO)
    assert not missing, (
        f"{', '.join(missing)}: write a comment saying what it does directly above the key "
        f"(or a commented-out `# key = value`) in profiles.example.toml, then `{REGENERATE}`")


def test_every_policy_row_has_its_words() -> None:
    missing = [key.value for key in POLICY if key not in WHEN]
    assert not missing, (f"POLICY rows {missing} need their words in WHEN "
                         "(claudex/engine/core/policy.py), then `make docs-gen`")
    assert set(WHEN) <= set(POLICY)


def _console_classes_with_keys() -> set[type]:
    found = set()
    for info in pkgutil.walk_packages(claudex.console.__path__, "claudex.console."):
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == info.name and cls.__dict__.get("BINDINGS"):
                found.add(cls)
    return found


def test_every_console_screen_with_keys_is_on_the_page() -> None:
    undocumented = _console_classes_with_keys() - set(console_page.documented_classes())
    assert not undocumented, (
        f"{sorted(c.__qualname__ for c in undocumented)} have BINDINGS: add them to "
        "OTHER_SCREENS in claudex/docs_gen/console_page.py, then `make docs-gen`")


def test_a_table_the_generator_does_not_know_stops_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_checks, "_TOP_LEVEL_KEYS", (*_checks._TOP_LEVEL_KEYS, "routes"))
    with pytest.raises(LookupError, match=r"routes.*claudex/docs_gen/config_page\.py"):
        config_page.render(REPO)


def test_a_policy_row_without_words_stops_the_generator(monkeypatch: pytest.MonkeyPatch) -> None:
    from claudex.docs_gen import policy_page

    key = next(iter(POLICY))
    monkeypatch.setattr(policy_page, "WHEN", {k: v for k, v in WHEN.items() if k != key})
    with pytest.raises(LookupError, match=rf"{key.value}.*WHEN"):
        policy_page.render()


def _copy_of_the_inputs(tmp_path: Path) -> Path:
    """A repository holding what the generator reads from disk (the example file)."""
    (tmp_path / "profiles.example.toml").write_bytes((REPO / "profiles.example.toml").read_bytes())
    return tmp_path


def test_stale_names_a_changed_page_a_missing_one_and_a_stray_file(tmp_path: Path) -> None:
    root = _copy_of_the_inputs(tmp_path)
    written = write(root)
    assert sorted(Path(p).name for p in written) == sorted(pages.render_all(root))
    assert stale(root) == [] and write(root) == []  # nothing to do twice

    reference = root / "docs" / "reference"
    (reference / "failures.md").write_text("# edited by hand\n", encoding="utf-8")
    (reference / "cli.md").unlink()
    (reference / "old-page.md").write_text("# gone from the generator\n", encoding="utf-8")
    assert stale(root) == ["docs/reference/failures.md", "docs/reference/cli.md",
                           "docs/reference/old-page.md"]


def test_check_mode_says_which_pages_and_how_to_regenerate(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = _copy_of_the_inputs(tmp_path)
    assert docs_gen_main(["--root", str(root), "--check"]) == 1
    err = capsys.readouterr().err
    assert "docs/reference/config.md: differs from the code" in err
    assert f"run `{REGENERATE}`" in err
    assert docs_gen_main(["--root", str(root)]) == 0
    assert docs_gen_main(["--root", str(root), "--check"]) == 0


def test_the_config_page_follows_an_edit_of_the_example_file(tmp_path: Path) -> None:
    root = _copy_of_the_inputs(tmp_path)
    example = root / "profiles.example.toml"
    text = example.read_text(encoding="utf-8")
    words = "# Consecutive failures (timeouts, 5xx, refused connections) that open the breaker."
    assert words in text
    example.write_text(text.replace(words, "# How many failures in a row open it."),
                       encoding="utf-8")
    page = config_page.render(root)
    assert re.search(r"\| `failure_threshold` \| `3` \| integer \| How many failures in a row "
                     r"open it\. \|", page)


def test_the_pages_read_no_terminal_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """argparse wraps its usage at $COLUMNS: the page must be the same on any terminal."""
    monkeypatch.setenv("COLUMNS", "40")
    narrow = pages.render_all(REPO)
    monkeypatch.setenv("COLUMNS", "300")
    assert pages.render_all(REPO) == narrow


def test_nothing_in_claudex_imports_the_generator() -> None:
    """docs_gen reads every layer; no layer may depend on it (nor on mkdocs, which only the dev
    install has)."""
    from tests.test_layers import PACKAGE, imported_modules

    users = [f"{path.relative_to(PACKAGE.parent)}:{line}"
             for path in sorted(PACKAGE.rglob("*.py")) if "docs_gen" not in path.parts
             for line, module in imported_modules(path)
             if module.startswith(("claudex.docs_gen", "mkdocs"))]
    assert users == []
