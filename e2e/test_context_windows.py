"""The real Claude Code's conversation on a backup too small for it (issue 22 items 3 and 6): its
Anthropic primary is down, the first backup has an 8,192-token context window (Claude Code's
system prompt and tools alone are longer), the second holds it. The first request's 400 ("This
model's maximum context length is 8192 tokens") fails over to the second backup instead of
reaching Claude Code; the window is remembered, so the session's later requests pass the small
backup over without sending. Claude Code finishes its tool loop with no error shown."""

from __future__ import annotations

from e2e.checks import assert_no_refusals, assert_openai_upstream, evidence, served_by
from e2e.harness import World

OPENAI_LIMIT = 8192
SMALL_WINDOW = 8192


async def test_a_long_conversation_skips_a_small_window_backup(world: World) -> None:
    anth = await world.fake("anth", "anthropic")
    small = await world.fake("small", "openai", max_output_tokens=OPENAI_LIMIT)
    small.context_window = SMALL_WINDOW
    big = await world.fake("big", "openai", max_output_tokens=OPENAI_LIMIT)
    anth.set_fault("down")
    world.profile("anth", anth, backups=["small", "big"])
    world.profile("small", small, default_model="small-chat", max_tokens=OPENAI_LIMIT)
    world.profile("big", big, default_model="big-chat", max_tokens=OPENAI_LIMIT)
    await world.serve()
    run = await world.claude([("Write", str(world.proof_path())), ("Bash", "echo step-two")])
    why = evidence(world, run)
    assert run.returncode == 0 and run.proof.read_text() == run.token, why
    assert f"done {run.token}" in run.stdout, why
    # small refused the first request only; every turn was served by big.
    assert [r.status for r in small.requests] == [400], why
    assert_no_refusals(world, allowed={("small", 400)})
    assert served_by(world) == ["big"] * 3, why
    logged = world.served.requests() if world.served is not None else []
    trails = [dict(request.attempts) for request in logged]
    assert trails[0]["small"] == "context_exceeded", why
    assert all(trail["small"] == "context_too_small" for trail in trails[1:]), why
    assert anth.requests == []
    assert_openai_upstream(big, big.requests, model="big-chat")
