"""The real Codex CLI (pinned, `codex exec`) runs a scripted shell step through a real
`claudex serve` against fake upstreams of each protocol: its `exec_command` tool writes the
proof file, then the provider says `done TOKEN`. Each scenario asserts the proof file, the final
text, exit 0, no 4xx anywhere, nothing tried outside 127.0.0.1, and what the fakes received.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from claudex.demo.fake_provider import FakeProvider
from e2e.checks import assert_no_refusals, evidence, served_by
from e2e.codex_cli import CLIENT_KEY, CodexRun, ensure_installed, run_codex
from e2e.harness import UPSTREAM_KEY, World


@pytest.fixture(scope="session")
def codex_binary() -> Path:
    return ensure_installed()


def assert_codex_completed(world: World, run: CodexRun) -> None:
    why = run.describe() + "\n" + evidence(world)
    assert run.returncode == 0, why
    assert run.proof.is_file(), f"no proof file {run.proof}\n{why}"
    assert run.proof.read_text() == run.token, why
    assert f"done {run.token}" in run.stdout, why
    assert_no_refusals(world)
    assert world.proxy_attempts() == [], f"Codex CLI tried to reach the outside\n{why}"


def _body(fake: FakeProvider, index: int) -> dict[str, Any]:
    body = fake.requests[index].json
    assert isinstance(body, dict)
    return body


def assert_upstream_saw_the_shell_loop(fake: FakeProvider) -> None:
    """Two requests: the first offers Codex's tools (web_search left out), the second carries
    the shell call's result; claudex's key went up, Codex's never."""
    assert len(fake.requests) == 2, [r.path for r in fake.requests]
    for recorded in fake.requests:
        headers = json.dumps(recorded.headers)
        assert CLIENT_KEY not in headers and UPSTREAM_KEY in headers
    text = json.dumps(_body(fake, 0)["tools"])
    assert "exec_command" in text and "web_search" not in text
    assert "Process exited with code 0" in json.dumps(_body(fake, 1))


async def test_codex_through_an_anthropic_profile(world: World, codex_binary: Path) -> None:
    anth = await world.fake("anth", "anthropic")
    world.profile("anth", anth, default_model="claude-sonnet-4-5")
    await world.serve()
    run = await run_codex(world, codex_binary, profile="anth")
    assert_codex_completed(world, run)
    assert served_by(world) == ["anth", "anth"], evidence(world)
    assert_upstream_saw_the_shell_loop(anth)
    first = _body(anth, 0)
    assert first["model"] == "claude-sonnet-4-5"
    assert "Codex" in json.dumps(first["system"])  # its developer message became the system


async def test_codex_through_an_openai_chat_profile(world: World, codex_binary: Path) -> None:
    oai = await world.fake("oai", "openai")
    world.profile("oai", oai, default_model="oai-chat")
    await world.serve()
    run = await run_codex(world, codex_binary, profile="oai")
    assert_codex_completed(world, run)
    assert served_by(world) == ["oai", "oai"], evidence(world)
    assert_upstream_saw_the_shell_loop(oai)
    assert _body(oai, 1)["messages"][-1]["role"] == "tool"


async def test_codex_through_a_responses_profile(world: World, codex_binary: Path) -> None:
    resp = await world.fake("resp", "responses")
    world.profile("resp", resp, default_model="resp-chat")
    await world.serve()
    run = await run_codex(world, codex_binary, profile="resp", model="resp-chat")
    assert_codex_completed(world, run)
    assert served_by(world) == ["resp", "resp"], evidence(world)
    # Same protocol: Codex's own request reached the upstream untouched, web_search included.
    assert len(resp.requests) == 2
    first = _body(resp, 0)
    assert first["store"] is False and first["stream"] is True
    assert any(t.get("type") == "web_search" for t in first["tools"])
    assert any(item.get("type") == "function_call_output" for item in _body(resp, 1)["input"])
    # Its reasoning (asked for with include) went back to the provider that made it, as sent.
    assert any(item.get("type") == "reasoning"
               and str(item.get("encrypted_content")).startswith("enc:resp:")
               for item in _body(resp, 1)["input"])


async def test_codex_fails_over_from_an_overloaded_responses_primary(
    world: World, codex_binary: Path,
) -> None:
    resp = await world.fake("resp", "responses")
    anth = await world.fake("anth", "anthropic")
    world.profile("resp", resp, backups=["anth"], default_model="resp-chat")
    world.profile("anth", anth, default_model="claude-sonnet-4-5")
    await world.serve()
    resp.set_fault("529")
    run = await run_codex(world, codex_binary, profile="resp", model="resp-chat")
    assert_codex_completed(world, run)
    assert served_by(world) == ["anth", "anth"], evidence(world)
    assert all(r.status == 529 for r in resp.requests) and len(resp.requests) == 2
    assert_upstream_saw_the_shell_loop(anth)
