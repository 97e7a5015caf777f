"""bench/pool_cache.py's claim, kept true: through a sticky pool the prompt cache does about as
well as one account, while the conversations spread; round robin does worse."""

from __future__ import annotations

from bench.pool_cache import lines, run


async def test_sticky_reads_the_cache_as_one_account_does_and_spreads_conversations() -> None:
    single = await run(None, 18, 5)
    sticky = await run("sticky", 18, 5)
    round_robin = await run("round_robin", 18, 5)
    assert single.failed == sticky.failed == round_robin.failed == 0
    assert abs(sticky.share - single.share) < 0.02
    assert round_robin.share < sticky.share - 0.05
    assert max(sticky.first_member.values()) <= 0.6 * 18
    assert len(sticky.first_member) == 3
    failing = await run("sticky", 18, 5, fail_at=0.5)
    assert failing.failed == 0 and failing.share > round_robin.share
    shown = lines({"conversations": 18, "turns": 5, "members": 3,
                   **{key: tally.to_json() for key, tally in (
                       ("single_account", single), ("sticky", sticky),
                       ("round_robin", round_robin), ("least_busy", round_robin),
                       ("sticky_member_fails", failing))}})
    assert shown[2].startswith("single_account") and "+0.0" in shown[2]
