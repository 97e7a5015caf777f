"""The real Claude Code through a pool of two fake Claude accounts (issue 23 item 6): the first
account's plan is spent after the session's first turn (its 5-hour window holds one token, so
the next request is a 429 `rejected`, as Anthropic answers a spent subscription). Every turn
lands on the first account until it is spent, then on the other, where the binding moved (a
spent window lasts longer than a prompt cache); Claude Code finishes its tool loop with no
error shown."""

from __future__ import annotations

from claudex.demo.fake_plans import Plan
from e2e.checks import evidence, served_by
from e2e.harness import World


async def test_a_session_moves_to_the_other_account_when_its_plan_is_spent(
        world: World) -> None:
    first = await world.fake("acct-a", "anthropic")
    second = await world.fake("acct-b", "anthropic")
    first.plan = Plan.claude(tokens_5h=1)  # spent by the first answer
    second.plan = Plan.claude()
    world.profile("acct-a", first)
    world.profile("acct-b", second)
    world.profiles.append('[[profiles]]\nname = "claude"\nmembers = ["acct-a", "acct-b"]\n')
    await world.serve()
    run = await world.claude([("Write", str(world.proof_path())), ("Bash", "echo step-two"),
                              ("Bash", "echo step-three")], profile="claude")
    why = evidence(world, run)
    assert run.returncode == 0 and run.proof.read_text() == run.token, why
    assert f"done {run.token}" in run.stdout, why
    assert "error" not in run.stdout.lower(), why

    served = served_by(world)
    assert served[0] == "acct-a" and len(served) >= 3, why
    switched = served.index("acct-b")
    # One account until it was spent, then the other, never back.
    assert served == ["acct-a"] * switched + ["acct-b"] * (len(served) - switched), why
    assert first.plan.refused >= 1, why
    logged = world.served.requests() if world.served is not None else []
    assert all(request.status == "200" for request in logged), why
    # The turn that met the spent window tried acct-a first and was served by acct-b; after
    # it the binding is at acct-b, which is tried first.
    moved = dict(logged[switched].attempts)
    assert "claude/acct-a" in moved and moved["claude/acct-b"] == "200", why
    assert all(request.attempts[0] == ("claude/acct-b", "200")
               for request in logged[switched + 1:]), why
