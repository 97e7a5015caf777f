"""What every end-to-end scenario asserts, and what each kind of upstream must have received.

Each check fails with the evidence: Claude Code's output, claudex's request log, and the fakes'
recorded requests (statuses, models, limits), so a failing scenario says which request was
refused, by whom and why.
"""

from __future__ import annotations

import json
from typing import Any

from claudex.demo.fake_bedrock import FakeBedrock
from claudex.demo.fake_provider import FakeProvider
from claudex.demo.recording import RecordedRequest
from e2e.harness import CLIENT_KEY, UPSTREAM_KEY, ClaudeRun, World


def evidence(world: World, run: ClaudeRun | None = None) -> str:
    parts = [run.describe()] if run is not None else []
    if world.served is not None:
        parts.append("--- claudex serve log ---\n" + "\n".join(world.served.log[-60:]))
    for name, fake in world.fakes.items():
        rows = [f"  {r.method} {r.path} model={_body(r).get('model')} "
                f"max_tokens={_limit(r)} -> {r.status}" for r in fake.requests]
        parts.append(f"--- fake {name} ({fake.protocol}) received ---\n" + "\n".join(rows))
    for name, cloud in world.clouds.items():
        rows = [f"  {r.method} {r.path} max_tokens={_limit(r)} -> {r.status}"
                for r in cloud.requests]
        parts.append(f"--- fake {name} (bedrock) received ---\n" + "\n".join(rows))
    return "\n".join(parts)


def assert_loop_completed(world: World, run: ClaudeRun) -> None:
    """Claude Code finished the script: exit 0, the proof file holds the token, the final text
    is `done TOKEN`, and nobody refused anything on the way."""
    why = evidence(world, run)
    assert run.returncode == 0, why
    assert run.proof.is_file(), f"no proof file {run.proof}\n{why}"
    assert run.proof.read_text() == run.token, why
    assert f"done {run.token}" in run.stdout, why
    assert_no_refusals(world)
    assert world.proxy_attempts() == [], f"Claude Code tried to reach the outside\n{why}"


def assert_no_refusals(world: World, *, allowed: set[tuple[str, int]] | None = None) -> None:
    """No 4xx anywhere: every request claudex logged was answered 200, none of its attempts
    was a 4xx, and no fake answered a 4xx (`allowed` names (fake, status) answers a scenario
    expects)."""
    why = evidence(world)
    assert world.served is not None
    logged = world.served.requests()
    assert logged, f"claudex logged no request\n{why}"
    for request in logged:
        assert request.status == "200", f"{request.line}\n{why}"
        for provider, outcome in request.attempts:
            assert not outcome.startswith("4"), f"{provider}: {request.line}\n{why}"
    upstreams: list[tuple[str, FakeProvider | FakeBedrock]] = [*world.fakes.items(),
                                                                *world.clouds.items()]
    for name, fake in upstreams:
        for recorded in fake.requests:
            status = recorded.status or 0
            if 400 <= status < 500 and (name, status) not in (allowed or set()):
                raise AssertionError(f"{name} answered {status} to "
                                     f"{json.dumps(_body(recorded))[:3000]}\n{why}")


def served_by(world: World) -> list[str]:
    """Who served each request, in order, as claudex logged it."""
    assert world.served is not None
    return [request.provider for request in world.served.requests()]


def assert_anthropic_upstream(fake: FakeProvider, requests: list[RecordedRequest]) -> None:
    """A same-protocol upstream got Claude Code's request as sent (DESIGN.md "Headers"), with
    the profile's key instead of the client's."""
    assert requests, f"{fake.name} received nothing"
    for recorded in requests:
        headers, body = recorded.headers, _body(recorded)
        where = f"{fake.name} {recorded.path}?{recorded.query}: {headers.get('user-agent')}"
        assert headers.get("x-api-key") == UPSTREAM_KEY, where
        assert str(body.get("model", "")).startswith("claude-"), where
        assert headers.get("user-agent", "").startswith("claude-cli/"), where
        assert headers.get("x-app") == "cli", where
        assert "x-claude-code-session-id" in headers, where
        assert "claude-code-20250219" in headers.get("anthropic-beta", ""), where
        assert recorded.query == "beta=true", where
        limit = _limit(recorded)
        assert limit is not None and limit <= (fake.max_output_tokens or 128_000), where
        _assert_no_client_key(recorded, where)


def assert_openai_upstream(fake: FakeProvider, requests: list[RecordedRequest], *,
                           model: str) -> None:
    """A translated upstream got a model it serves, a max_tokens inside its range, Claude
    Code's system turns as system messages in place, the profile's key, and nothing of the
    client's identity (no Anthropic headers, no device/session id as `user`)."""
    assert requests, f"{fake.name} received nothing"
    for recorded in requests:
        headers, body = recorded.headers, _body(recorded)
        where = f"{fake.name} {recorded.path} model={body.get('model')}"
        assert body.get("model") == model, where
        assert not str(body.get("model")).startswith("claude-"), where
        limit = _limit(recorded)
        assert limit is None or limit <= (fake.max_output_tokens or 128_000), where
        assert headers.get("authorization") == f"Bearer {UPSTREAM_KEY}", where
        for name in ("x-api-key", "anthropic-beta", "anthropic-version", "x-app",
                     "x-claude-code-session-id"):
            assert name not in headers, f"{where}: {name} reached a translated upstream"
        messages = body.get("messages", [])
        roles = [m.get("role") for m in messages]
        assert roles and roles[0] == "system", f"{where}: {roles}"
        assert "system" in roles[1:], f"{where}: the in-conversation system turn is gone: {roles}"
        assert "user" not in body, f"{where}: user={body.get('user')!r}"
        assert "device_id" not in json.dumps(body), f"{where}: Claude Code's device id sent"
        assert any(m.get("role") == "user" and "claudex-e2e:" in json.dumps(m)
                   for m in messages), where
        _assert_no_client_key(recorded, where)


def _assert_no_client_key(recorded: RecordedRequest, where: str) -> None:
    for name, value in recorded.headers.items():
        assert CLIENT_KEY not in value, f"{where}: the client's key in {name}"


def tool_results(recorded: RecordedRequest) -> int:
    """How many tool results the conversation a fake received holds (either protocol)."""
    count = 0
    for message in _body(recorded).get("messages", []):
        if message.get("role") == "tool":
            count += 1
        content = message.get("content")
        if message.get("role") == "user" and isinstance(content, list):
            count += sum(1 for b in content if isinstance(b, dict)
                         and b.get("type") == "tool_result")
    return count


def thinking_signatures(recorded: RecordedRequest) -> list[str]:
    """The signatures of the thinking blocks in the assistant turns a fake received."""
    found = []
    for message in _body(recorded).get("messages", []):
        content = message.get("content")
        if message.get("role") == "assistant" and isinstance(content, list):
            found += [str(b.get("signature") or b.get("data")) for b in content
                      if isinstance(b, dict) and b.get("type") in ("thinking",
                                                                   "redacted_thinking")]
    return found


def _body(recorded: RecordedRequest) -> dict[str, Any]:
    return recorded.json if isinstance(recorded.json, dict) else {}


def _limit(recorded: RecordedRequest) -> int | None:
    body = _body(recorded)
    value = body.get("max_tokens", body.get("max_completion_tokens"))
    return value if isinstance(value, int) else None
