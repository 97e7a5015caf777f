"""claudex: a local failover proxy for LLM API providers with a terminal operations console."""

import sys as _sys

# httpx's package init imports its own command line (`httpx._main`: rich, pygments and click,
# ~3 MB of memory in every claudex process) whenever those are installed, and the console's
# dependencies install them. claudex never runs httpx's command line: marked absent before
# httpx is imported, httpx falls back to its stub `main` (its `except ImportError`). A
# process that imported httpx before claudex keeps what it had.
if "httpx" not in _sys.modules:
    _sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]

__version__ = "0.1.0"
