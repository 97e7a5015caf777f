"""The real Claude Code and Claude on Bedrock (issue 37), through a real `claudex serve`.

1. Claude Code with its Anthropic primary down: the Bedrock backup (the fake, checking SigV4 with
   botocore and refusing what Bedrock refuses) serves every turn of the scripted tool loop,
   streamed, with thinking. What Bedrock refuses of Claude Code's request (its betas, fields
   such as output_config) is learned on the first request and left out from then on.
2. Claude Code in Bedrock mode (CLAUDE_CODE_USE_BEDROCK, ANTHROPIC_BEDROCK_BASE_URL at claudex,
   CLAUDE_CODE_SKIP_BEDROCK_AUTH): claudex answers Bedrock's routes in eventstream frames, its
   Anthropic primary serves until a Bash step breaks it, then the Bedrock backup does.
"""

from __future__ import annotations

from e2e.checks import evidence, served_by, thinking_signatures
from e2e.harness import World

MODEL = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"


def _bedrock_mode(world: World, path: str = "") -> dict[str, str]:
    assert world.served is not None
    return {"CLAUDE_CODE_USE_BEDROCK": "1", "CLAUDE_CODE_SKIP_BEDROCK_AUTH": "1",
            "ANTHROPIC_BEDROCK_BASE_URL": world.served.url + path, "AWS_REGION": "us-east-1"}


async def test_a_down_primary_and_bedrock_serves_every_turn(world: World) -> None:
    anth = await world.fake("anth", "anthropic")
    anth.set_fault("down")
    bedrock = await world.bedrock("bedrock")
    world.profile("anth", anth, backups=["bedrock"])
    world.bedrock_profile("bedrock", bedrock, model=MODEL)
    await world.serve()
    run = await world.claude([("Write", str(world.proof_path())), ("Bash", "echo step-two")])
    served = [r.status for r in bedrock.requests]
    assert run.returncode == 0 and run.proof.read_text() == run.token, evidence(world, run)
    assert f"done {run.token}" in run.stdout, evidence(world, run)
    assert served_by(world) == ["bedrock"] * 3, evidence(world, run)
    assert anth.requests == [] and world.proxy_attempts() == []
    # Only the first request met Bedrock's refusals; from then on each turn was one request.
    assert served[-2:] == [200, 200] and all(s in (200, 400) for s in served), served
    assert served.count(200) == 3, evidence(world, run)
    ok = [r for r in bedrock.requests if r.status == 200]
    for recorded in ok:
        assert recorded.path == f"/model/{MODEL}/invoke-with-response-stream"
        assert recorded.headers["authorization"].startswith("AWS4-HMAC-SHA256 ")
        assert recorded.json["anthropic_version"] == "bedrock-2023-05-31"
        assert "model" not in recorded.json and "stream" not in recorded.json
        assert recorded.json.get("thinking"), "thinking went off"
    # The later turns carried Bedrock's own signed thinking back to it.
    assert thinking_signatures(ok[-1]), evidence(world, run)
    assert world.served is not None
    learned = [line for line in world.served.log if "from now on" in line]
    assert any("invalid beta flag" in line for line in learned), evidence(world, run)
    assert any("output_config" in line for line in learned), evidence(world, run)


async def test_claude_code_in_bedrock_mode_gets_claudexs_failover(world: World) -> None:
    anth = await world.fake("anth", "anthropic")
    bedrock = await world.bedrock("bedrock")
    world.profile("anth", anth, backups=["bedrock"])
    world.bedrock_profile("bedrock", bedrock, model=MODEL)
    await world.serve()
    run = await world.claude([
        ("Write", str(world.proof_path())),
        ("Bash", world.fault_command(anth, "500")),  # from here on the primary fails
        ("Bash", "echo served-by-bedrock"),
    ], mode=_bedrock_mode(world))
    why = evidence(world, run)
    assert run.returncode == 0 and run.proof.read_text() == run.token, why
    assert f"done {run.token}" in run.stdout, why
    assert served_by(world) == ["anth", "anth", "bedrock", "bedrock"], why
    assert world.proxy_attempts() == [], why
    # Claude Code spoke Bedrock's wire to claudex: its requests were logged as the invoke
    # routes; the Anthropic primary got Anthropic model names.
    assert all(str(r.json.get("model", "")).startswith("claude-") for r in anth.requests), why
    assert [r.status for r in bedrock.requests if r.status == 200] == [200, 200], why
