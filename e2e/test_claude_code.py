"""The real Claude Code (pinned, default model claude-opus-5-5) runs a scripted tool loop
through a real `claudex serve` against fake upstreams: Write a proof file, run Bash, finish
with `done TOKEN`. Each scenario asserts the proof file, the final text, exit 0, no refused
request anywhere, and what each upstream received.

The script lives in the prompt (`claudex.demo.scripted`); its Bash steps are how a scenario
changes the world mid-session (a fault switched on at the primary, the primary brought back).
"""

from __future__ import annotations

import json

from claudex.demo.fake_responses import ChatGPTRules
from e2e.checks import (
    assert_anthropic_upstream,
    assert_loop_completed,
    assert_no_refusals,
    assert_openai_upstream,
    evidence,
    served_by,
    thinking_signatures,
    tool_results,
)
from e2e.harness import World

OPENAI_LIMIT = 8192
"""The OpenAI-compatible fake's output limit (DeepSeek's): Claude Code asks for 128,000."""


async def test_tool_loop_through_an_anthropic_profile(world: World) -> None:
    anth = await world.fake("anth", "anthropic")
    world.profile("anth", anth)
    await world.serve()
    run = await world.claude([("Write", str(world.proof_path())), ("Bash", "echo step-two")],
                             profile="anth")
    assert_loop_completed(world, run)
    assert served_by(world) == ["anth"] * 3, evidence(world, run)
    assert_anthropic_upstream(anth, anth.requests)
    # The conversation reached the upstream as Claude Code wrote it: its system turn inside
    # messages, its adaptive thinking, context management and output config.
    first = anth.requests[0].json
    assert any(m["role"] == "system" for m in first["messages"])
    assert first["thinking"]["type"] == "adaptive"
    assert "context_management" in first and "output_config" in first
    assert any(t.get("defer_loading") for t in first["tools"])


async def test_tool_loop_through_an_openai_profile(world: World) -> None:
    oai = await world.fake("oai", "openai", max_output_tokens=OPENAI_LIMIT)
    world.profile("oai", oai, default_model="oai-chat", max_tokens=OPENAI_LIMIT)
    await world.serve()
    run = await world.claude([("Write", str(world.proof_path())), ("Bash", "echo step-two")],
                             profile="oai")
    assert_loop_completed(world, run)
    assert served_by(world) == ["oai"] * 3, evidence(world, run)
    assert_openai_upstream(oai, oai.requests, model="oai-chat")
    assert [tool_results(r) for r in oai.requests] == [0, 1, 2]


async def test_an_openai_profile_without_max_tokens_learns_the_providers_cap(
    world: World,
) -> None:
    """No `max_tokens` in the profile: the provider's 400 states its range, claudex asks once
    more at that cap and remembers it, so the client never sees the refusal and only the
    conversation's first request is refused upstream."""
    oai = await world.fake("oai", "openai", max_output_tokens=OPENAI_LIMIT)
    world.profile("oai", oai, default_model="oai-chat")
    await world.serve()
    run = await world.claude([("Write", str(world.proof_path())), ("Bash", "echo step-two")],
                             profile="oai")
    statuses = [r.status for r in oai.requests]
    assert statuses == [400, 200, 200, 200], evidence(world, run)
    assert run.returncode == 0 and run.proof.read_text() == run.token, evidence(world, run)
    assert f"done {run.token}" in run.stdout, evidence(world, run)
    assert_no_refusals(world, allowed={("oai", 400)})
    assert_openai_upstream(oai, oai.requests[1:], model="oai-chat")


async def test_failover_from_a_down_anthropic_primary_to_an_openai_backup(world: World) -> None:
    anth = await world.fake("anth", "anthropic")
    oai = await world.fake("oai", "openai", max_output_tokens=OPENAI_LIMIT)
    anth.set_fault("down")
    world.profile("anth", anth, backups=["oai"])
    world.profile("oai", oai, default_model="oai-chat", max_tokens=OPENAI_LIMIT)
    await world.serve()
    # The default route (/v1/messages): the first profile, anth.
    run = await world.claude([("Write", str(world.proof_path())), ("Bash", "echo step-two")])
    assert_loop_completed(world, run)
    assert served_by(world) == ["oai"] * 3, evidence(world, run)
    assert anth.requests == []
    assert_openai_upstream(oai, oai.requests, model="oai-chat")


async def test_mid_session_failover_to_an_openai_backup(world: World) -> None:
    anth = await world.fake("anth", "anthropic")
    oai = await world.fake("oai", "openai", max_output_tokens=OPENAI_LIMIT)
    world.profile("anth", anth, backups=["oai"])
    world.profile("oai", oai, default_model="oai-chat", max_tokens=OPENAI_LIMIT)
    await world.serve()
    run = await world.claude([
        ("Write", str(world.proof_path())),
        ("Bash", world.fault_command(anth, "500")),  # from here on the primary fails
        ("Bash", "echo served-by-the-backup"),
    ], profile="anth")
    assert_loop_completed(world, run)
    assert served_by(world) == ["anth", "anth", "oai", "oai"], evidence(world, run)
    assert [r.status for r in anth.requests] == [200, 200, 500, 500], evidence(world, run)
    assert_anthropic_upstream(anth, anth.requests)
    assert_openai_upstream(oai, oai.requests, model="oai-chat")
    # The backup got the whole conversation so far, tool rounds included.
    assert [tool_results(r) for r in oai.requests] == [2, 3]


async def _fail_back(world: World, backup_protocol: str) -> None:
    """The primary serves step 1 with signed thinking, then fails (a Bash step switches its
    fault on); the backup serves steps 2 and 3, the last of which brings the primary back
    (fault off, breaker reset through `claudex reset`); the primary serves the end with the
    whole conversation, thinking still on."""
    anth = await world.fake("anth", "anthropic")
    if backup_protocol == "anthropic":
        backup = await world.fake("anth2", "anthropic")
        world.profile("anth", anth, backups=["anth2"])
        world.profile("anth2", backup)
    else:
        backup = await world.fake("oai", "openai", max_output_tokens=OPENAI_LIMIT)
        world.profile("anth", anth, backups=["oai"])
        world.profile("oai", backup, default_model="oai-chat", max_tokens=OPENAI_LIMIT)
    # One failure opens the breaker: coming back takes the reset, not a timer.
    world.settings = "[breaker]\nfailure_threshold = 1\n"
    await world.serve()
    bring_back = (world.fault_command(anth, "ok") + " && "
                  + world.claudex_command("reset", "anth"))
    run = await world.claude([
        ("Bash", world.fault_command(anth, "500")),
        ("Write", str(world.proof_path())),
        ("Bash", bring_back),
    ], profile="anth")
    assert_loop_completed(world, run)
    assert served_by(world) == ["anth", backup.name, backup.name, "anth"], evidence(world, run)
    # anth: step 1 served, the 500 that opened its breaker, then (breaker open, not contacted)
    # nothing until the reset, then the end of the conversation.
    assert [r.status for r in anth.requests] == [200, 500, 200], evidence(world, run)
    last = anth.requests[-1]
    assert tool_results(last) == 3, evidence(world, run)
    assert last.json["thinking"]["type"] == "adaptive"
    # What anth answered first was signed thinking, and Claude Code sent it back; back at
    # anth the conversation carries that block and no thinking another provider signed.
    own = thinking_signatures(anth.requests[1])
    assert len(own) == 1, evidence(world, run)
    assert thinking_signatures(last) == own, evidence(world, run)
    assert_anthropic_upstream(anth, anth.requests)
    if backup_protocol == "anthropic":
        assert_anthropic_upstream(backup, backup.requests)
        # anth's signed block never reached anth2; anth2's own block came back to it.
        signed = [thinking_signatures(r) for r in backup.requests]
        assert len(signed) == 2 and signed[0] == [] and len(signed[1]) == 1, signed
        assert own[0] not in signed[1]
    else:
        assert_openai_upstream(backup, backup.requests, model="oai-chat")


async def test_fail_back_to_the_primary_with_thinking_after_an_openai_backup(
    world: World,
) -> None:
    await _fail_back(world, "openai")


async def test_fail_back_to_the_primary_with_thinking_after_an_anthropic_backup(
    world: World,
) -> None:
    await _fail_back(world, "anthropic")


async def test_the_refusing_proxy_catches_what_would_leave_the_machine(world: World) -> None:
    """The harness's own check: pointed at Anthropic's real API, Claude Code's request goes to
    the refusing proxy (so a scenario's empty proxy record means nothing left the machine)."""
    run = await world.claude([("Bash", "echo unreachable")], base_url="https://api.anthropic.com")
    assert run.returncode != 0, run.describe()
    attempts = world.proxy_attempts()
    assert attempts and {(a.method, a.target) for a in attempts} == \
        {("CONNECT", "api.anthropic.com:443")}, attempts


async def test_tool_loop_through_a_chatgpt_subscription_profile(world: World) -> None:
    """An OpenAIResponses profile on a Codex CLI login (auth.json in the isolated home) against
    a fake ChatGPT backend that enforces that backend's rules: Bearer token and account id,
    `store: false`, streaming only, no max_output_tokens or sampling settings."""
    backend = await world.fake("chatgpt", "responses", strict_models=False)
    backend.chatgpt = ChatGPTRules(account_id="acct-e2e")
    codex_home = world.home / ".codex"
    codex_home.mkdir()
    auth_json = codex_home / "auth.json"
    auth_json.write_text(json.dumps({
        "OPENAI_API_KEY": None, "last_refresh": "2099-01-01T00:00:00Z",
        "tokens": {"id_token": "id", "access_token": "e2e-chatgpt-token",
                   "refresh_token": "e2e-refresh", "account_id": "acct-e2e"}}))
    auth_json.chmod(0o600)
    world.profiles.append(
        '[[profiles]]\nname = "codex"\nprovider_type = "OpenAIResponses"\n'
        f'base_url = "{backend.base_url}"\ndefault_model = "gpt-5-codex"\n'
        'auth_type = "oauth"\noauth_provider = "codex"\n')
    await world.serve()
    run = await world.claude([("Write", str(world.proof_path())), ("Bash", "echo step-two")],
                             profile="codex")
    assert_loop_completed(world, run)
    assert served_by(world) == ["codex"] * 3, evidence(world, run)
    assert [r.status for r in backend.requests] == [200] * 3, evidence(world, run)
    for recorded in backend.requests:
        body, headers = recorded.json, recorded.headers
        assert headers["authorization"] == "Bearer e2e-chatgpt-token"
        assert headers["chatgpt-account-id"] == "acct-e2e"
        for name in ("x-api-key", "anthropic-beta", "anthropic-version", "x-app"):
            assert name not in headers, name
        assert body["model"] == "gpt-5-codex" and body["stream"] is True
        assert body["store"] is False and "max_output_tokens" not in body
        kinds = [item.get("type") for item in body["input"]]
        # Claude Code's system prompt goes in `instructions`, which the ChatGPT backend
        # requires ("Instructions are required"; DESIGN.md, OAuth): the input starts with
        # the first user turn, no developer message before it.
        assert isinstance(body["instructions"], str) and len(body["instructions"]) > 200
        assert body["input"][0]["role"] == "user"
        assert "device_id" not in json.dumps(body)
    # The tool rounds went back as function calls and their outputs, call ids kept.
    last = backend.requests[-1].json["input"]
    calls = [i["call_id"] for i in last if i.get("type") == "function_call"]
    outputs = [i["call_id"] for i in last if i.get("type") == "function_call_output"]
    assert len(calls) == 2 and calls == outputs, kinds
    # And the model's reasoning of each tool turn went back to it (the fake refuses another
    # provider's reasoning, and reasoning sent with an id while nothing is stored).
    reasoning = [i for i in last if i.get("type") == "reasoning"]
    assert len(reasoning) == 2 and all(
        r["encrypted_content"].startswith("enc:chatgpt:") for r in reasoning), kinds


async def test_a_subscription_spent_mid_session_continues_on_the_backup_and_comes_back(
    world: World,
) -> None:
    """A Claude subscription (a fake plan sending the unified headers) serves the first turn;
    a Bash step spends its 5-hour window, resetting 8 s later. The next turns are served by
    the backup with no error shown (one 429 at the plan, none of its retries); a later Bash
    step waits past the reset and the plan serves the end of the session by itself."""
    sub, backup = await world.subscription()
    spend = world.spend_command(sub, 8)
    run = await world.claude([
        ("Bash", spend),                       # turn 1 at sub; from here its window is spent
        ("Write", str(world.proof_path())),    # turn 2: sub's 429, the backup serves
        ("Bash", "sleep 10"),                  # turn 3: sub skipped unsent, the backup serves
    ], profile="sub")                          # turn 4, after the reset: sub again
    why = evidence(world, run)
    assert run.returncode == 0 and run.proof.read_text() == run.token, why
    assert f"done {run.token}" in run.stdout, why
    assert "limit" not in run.stdout.lower() and "error" not in run.stdout.lower(), why
    assert served_by(world) == ["sub", "anth2", "anth2", "sub"], why
    assert [r.status for r in sub.requests] == [200, 429, 200], why  # one request while spent
    assert sub.plan is not None and sub.plan.refused == 1, why
    assert_no_refusals(world, allowed={("sub", 429)})
    assert world.proxy_attempts() == [], why
    trails = [r.attempts for r in world.served.requests()] if world.served else []
    assert trails[1] == (("sub", "plan_limit"), ("anth2", "200")), why
    assert trails[2] == (("sub", "window_spent"), ("anth2", "200")), why
    assert_anthropic_upstream(sub, sub.requests)
    assert_anthropic_upstream(backup, backup.requests)


async def test_the_operators_reset_ends_a_spent_window_mid_session(world: World) -> None:
    """A Claude subscription's 5-hour window is spent for an hour mid-session; the operator
    runs `claudex reset sub` (issue 30). The plan, still spent, gets exactly one request after
    the reset, which marks it again; the backup serves every turn from the spend on, and
    Claude Code sees no error."""
    sub, backup = await world.subscription()
    spend = world.spend_command(sub, 3600)
    run = await world.claude([
        ("Bash", spend),                              # turn 1 at sub; then spent for an hour
        ("Write", str(world.proof_path())),           # turn 2: sub's 429, the backup serves
        ("Bash", world.claudex_command("reset", "sub")),  # turn 3: sub skipped unsent
    ], profile="sub")                                 # turn 4, after the reset: sub once more
    why = evidence(world, run)
    assert run.returncode == 0 and run.proof.read_text() == run.token, why
    assert f"done {run.token}" in run.stdout, why
    assert served_by(world) == ["sub", "anth2", "anth2", "anth2"], why
    assert [r.status for r in sub.requests] == [200, 429, 429], why  # one request after reset
    assert_no_refusals(world, allowed={("sub", 429)})
    assert world.proxy_attempts() == [], why
    trails = [r.attempts for r in world.served.requests()] if world.served else []
    assert trails[1] == (("sub", "plan_limit"), ("anth2", "200")), why
    assert trails[2] == (("sub", "window_spent"), ("anth2", "200")), why
    assert trails[3] == (("sub", "plan_limit"), ("anth2", "200")), why
    assert "sub: reset by operator (5-hour window no longer treated as spent)" in \
        "\n".join(world.served.log if world.served else []), why
    assert_anthropic_upstream(sub, sub.requests)
    assert_anthropic_upstream(backup, backup.requests)
