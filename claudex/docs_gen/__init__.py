"""The docs site's reference pages, generated from the code's own tables (issue 25).

One module per page, each reading the table the code itself runs on: the failure policy
(`policy_page`), the config schema, defaults and the example file's words (`config_page`), the
console's bindings (`console_page`), the argument parser (`cli_page`), translation's drop tables
(`drops_page`) and the metrics collector (`metrics_page`). `pages` lists them and writes or
checks docs/reference/; `python -m claudex.docs_gen` (`make docs-gen`) and the mkdocs hook
(docs/hooks.py, every `make docs`) run it, and tests/docs checks that the committed pages are
what it writes.

It lives in the package, not beside the docs, so that mypy strict and ruff check it with the
code it reads, and the test and the hook import it without path tricks. Nothing else in claudex
imports it: it is a tool that reads the layers, like the command line.
"""

from claudex.docs_gen.pages import PAGES, REFERENCE_DIR, REGENERATE, render_all, stale, write

__all__ = ["PAGES", "REFERENCE_DIR", "REGENERATE", "render_all", "stale", "write"]
