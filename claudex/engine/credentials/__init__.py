"""Upstream credentials (DESIGN.md "OAuth refresh-then-retry"): where a token comes from
(`token_sources.py`, `token_command.py`, `oauth.py`), its wire form (`auth_headers.py`), and the
per-profile cache with the refresh coordination (`cache.py`)."""
