"""Fixtures of `make e2e`: the pinned Claude Code (installed into the cache once), the refusing
proxy (one for the session), and a `world` per test (fakes, claudex serve, scratch folders).

At the end the terminal summary prints, per scenario, what each fake upstream received and what
the refusing proxy was asked to reach.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest

from claudex.demo.fake_bedrock import FakeBedrock
from claudex.demo.fake_provider import FakeProvider
from e2e.claude_code import ensure_installed
from e2e.harness import CLIENT_KEY, UPSTREAM_KEY, World
from e2e.refusing_proxy import RefusingProxy

E2E_TIMEOUT_S = 600
"""pytest-timeout's bound for one scenario (the project default of 60 s is for unit tests)."""

_TABLE: list[tuple[str, list[str], list[str]]] = []
"""Per scenario: what the fakes received, what the refusing proxy refused."""


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        item.add_marker(pytest.mark.timeout(E2E_TIMEOUT_S))


@pytest.fixture(scope="session")
def claude_binary() -> Path:
    return ensure_installed()


@pytest.fixture(scope="session")
def refusing_proxy() -> Iterator[RefusingProxy]:
    with RefusingProxy() as proxy:
        yield proxy


@pytest.fixture
async def world(tmp_path: Path, claude_binary: Path, refusing_proxy: RefusingProxy,
                request: pytest.FixtureRequest) -> AsyncIterator[World]:
    built = World(tmp_path, claude_binary, refusing_proxy)
    try:
        yield built
    finally:
        refused = Counter(f"{a.method} {a.target}" for a in built.proxy_attempts())
        _TABLE.append((request.node.name, traffic_lines(built),
                       [f"{target} x{count}" for target, count in refused.items()]))
        await built.close()


def traffic_lines(world: World) -> list[str]:
    """One line per upstream request: fake, path?query, model, max_tokens, status, headers."""
    lines = []
    upstreams: list[tuple[str, FakeProvider | FakeBedrock]] = [*world.fakes.items(),
                                                                *world.clouds.items()]
    for name, fake in upstreams:
        for recorded in fake.requests:
            body: Any = recorded.json if isinstance(recorded.json, dict) else {}
            limit = body.get("max_tokens", body.get("max_completion_tokens"))
            roles = [m.get("role") for m in body.get("messages", []) if isinstance(m, dict)]
            query = f"?{recorded.query}" if getattr(recorded, "query", "") else ""
            agent = recorded.headers.get("user-agent", "-")
            lines.append(
                f"{name:<6} {recorded.method} {recorded.path}{query}  model={body.get('model')} "
                f"max_tokens={limit} status={recorded.status} system_turns="
                f"{roles.count('system')} key={_credential(recorded.headers)} "
                f"ua={agent[:40]!r} x-app={recorded.headers.get('x-app')}")
    return lines


def _credential(headers: dict[str, str]) -> str:
    """Which credential reached the upstream: the profile's, the client's, or none."""
    for name in ("x-api-key", "authorization"):
        value = headers.get(name, "")
        for key, who in ((UPSTREAM_KEY, "profile's"), (CLIENT_KEY, "CLIENT'S")):
            if key in value:
                return f"{who}({name})"
    return "none"


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _TABLE:
        return
    write = terminalreporter.write_line
    terminalreporter.section("what the fake upstreams received")
    for test, lines, _ in _TABLE:
        write(test)
        for line in lines or ["(nothing)"]:
            write("  " + line)
    terminalreporter.section("what the refusing proxy refused")
    for test, _, refused in _TABLE:
        write(f"{test}: {', '.join(refused) if refused else 'nothing attempted'}")
