"""Where the tests' files are, whichever folder a test lives in."""

from __future__ import annotations

from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
EXAMPLE = REPO / "profiles.example.toml"
GOLDEN = TESTS / "golden" / "translate"
FIXTURES = TESTS / "fixtures"
