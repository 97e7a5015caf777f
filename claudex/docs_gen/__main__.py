"""`python -m claudex.docs_gen [--check] [--root DIR]` (`make docs-gen`): write the reference
pages under DIR/docs/reference (DIR: the current directory), or with --check only say which
differ (exit 1)."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from claudex.docs_gen.pages import REGENERATE, stale, write


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m claudex.docs_gen",
                                     description="write the docs' generated reference pages")
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 if a page differs from the code")
    parser.add_argument("--root", type=Path, default=Path.cwd(),
                        help="the repository (default: the current directory)")
    args = parser.parse_args(argv)
    root: Path = args.root
    if args.check:
        differing = stale(root)
        for path in differing:
            print(f"{path}: differs from the code", file=sys.stderr)
        if differing:
            print(f"run `{REGENERATE}` to write them", file=sys.stderr)
        return 1 if differing else 0
    for path in write(root):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
