"""The real Codex CLI (pinned, `codex exec`) runs a scripted shell step through a real
`claudex serve` against fake upstreams of each protocol: its `exec_command` tool writes the
proof file, then the provider says `done TOKEN`. Each scenario asserts the proof file, the final
text, exit 0, no 4xx anywhere, nothing tried outside 127.0.0.1, and what the fakes received.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import pytest

from claudex.demo.fake_plans import Plan
from claudex.demo.fake_provider import FakeProvider
from claudex.demo.fake_responses import ChatGPTRules
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


async def test_codex_on_a_chatgpt_plan_spent_mid_session_continues_on_the_backup_and_comes_back(
    world: World, codex_binary: Path,
) -> None:
    """The real Codex CLI on a ChatGPT-subscription profile (the fake ChatGPT backend with a
    plan: x-codex-* headers, the codex.rate_limits event, `usage_limit_reached` when full). A
    shell step spends the plan's 5-hour window, resetting 6 s later; the next turns are served
    by the backup with no error shown (one 429 at the plan, none of its retries; then the plan
    passed over unsent), and after a shell step that waits past the reset the plan serves the
    end of the session by itself."""
    backend = await world.fake("codex", "responses", strict_models=False)
    backend.chatgpt = ChatGPTRules(account_id="acct-e2e")
    backend.plan = Plan.chatgpt()
    anth = await world.fake("anth", "anthropic")
    codex_home = world.home / ".codex"
    codex_home.mkdir(parents=True, exist_ok=True)
    auth_json = codex_home / "auth.json"  # claudex's login for the plan (not the CLI's key)
    auth_json.write_text(json.dumps({
        "OPENAI_API_KEY": None, "last_refresh": "2099-01-01T00:00:00Z",
        "tokens": {"id_token": "id", "access_token": "e2e-chatgpt-token",
                   "refresh_token": "e2e-refresh", "account_id": "acct-e2e"}}))
    auth_json.chmod(0o600)
    world.profiles.append(
        '[[profiles]]\nname = "codex"\nprovider_type = "OpenAIResponses"\n'
        f'base_url = "{backend.base_url}"\ndefault_model = "gpt-5-codex"\n'
        'auth_type = "oauth"\noauth_provider = "codex"\nbackup_providers = ["anth"]\n')
    world.profile("anth", anth, default_model="claude-sonnet-4-5")
    await world.serve()
    root = backend.base_url.removesuffix("/v1")
    spend = shlex.join(["curl", "-sf", "-o", "/dev/null", "-w", "plan spent: %{http_code}",
                        "-X", "POST", f"{root}/_fake/plan", "-H",
                        "content-type: application/json", "-d", '{"spend_s": 6}'])
    run = await run_codex(world, codex_binary, profile="codex", model="gpt-5-codex",
                          before=[spend],     # turn 1 at the plan; from here it is spent
                          # turn 2 (the proof): the plan's 429, the backup serves
                          after=["sleep 9"])  # turn 3: the plan skipped unsent, the backup
    why = run.describe() + "\n" + evidence(world)  # turn 4, after the reset: the plan again
    assert run.returncode == 0, why
    assert run.proof.read_text() == run.token, why
    assert f"done {run.token}" in run.stdout, why
    assert "limit" not in run.stdout.lower() and "error" not in run.stdout.lower(), why
    assert served_by(world) == ["codex", "anth", "anth", "codex"], why
    assert [r.status for r in backend.requests] == [200, 429, 200], why
    assert backend.plan.refused == 1, why
    assert_no_refusals(world, allowed={("codex", 429)})
    assert world.proxy_attempts() == [], why
    trails = [r.attempts for r in world.served.requests()] if world.served else []
    assert trails[1] == (("codex", "plan_limit"), ("anth", "200")), why
    assert trails[2] == (("codex", "window_spent"), ("anth", "200")), why
    for recorded in backend.requests:  # the plan got claudex's login, never the CLI's key
        assert recorded.headers["authorization"] == "Bearer e2e-chatgpt-token", why
        assert CLIENT_KEY not in json.dumps(recorded.headers), why
