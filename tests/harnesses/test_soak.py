"""The chaos soak: its judges can fail (unit tests), and a 30-second soak against a real
`claudex serve` loses nothing (the full 20,000-request run is `make soak`)."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from soak.breaker_model import BreakerModel, Transition
from soak.chaos import schedule
from soak.checks import judge, upstream_problem
from soak.memory_check import SLOPE_MIN_REQUESTS
from soak.report import summary_table
from soak.run import SoakPlan, run_soak
from soak.traffic import Exchange, RequestSpec

ANTHROPIC_STREAM = (
    b'event: message_start\ndata: {"type":"message_start","message":{"usage":{"input_tokens":1}}}'
    b'\n\nevent: content_block_start\ndata: {"type":"content_block_start","index":0,'
    b'"content_block":{"type":"text","text":""}}\n\nevent: content_block_delta\ndata: '
    b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hi"}}\n\n'
    b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn"},'
    b'"usage":{"output_tokens":1}}\n\nevent: message_stop\ndata: {"type":"message_stop"}\n\n'
)


def exchange(protocol: str, stream: bool, status: int, body: bytes, *,
             headers: dict[str, str] | None = None, latency: float = 0.1) -> Exchange:
    spec = RequestSpec(7, protocol, "alpha", stream)
    base = {"x-claudex-provider": "alpha", "x-claudex-attempts": "alpha:200",
            "content-type": "text/event-stream" if stream else "application/json"}
    return Exchange(spec, started=100.0, ended=100.0 + latency, headers_at=100.05,
                    status=status, headers={**base, **(headers or {})}, body=body)


def test_a_complete_stream_is_ok_and_a_truncated_one_is_malformed() -> None:
    assert judge(exchange("anthropic", True, 200, ANTHROPIC_STREAM), 10).outcome == "ok"
    cut = ANTHROPIC_STREAM[: ANTHROPIC_STREAM.index(b"event: message_delta")]
    verdict = judge(exchange("anthropic", True, 200, cut), 10)
    assert verdict.outcome == "malformed" and "message_stop" in verdict.detail


def test_a_committed_stream_ending_in_one_error_event_is_a_stream_error() -> None:
    cut = ANTHROPIC_STREAM[: ANTHROPIC_STREAM.index(b"event: content_block_stop")]
    error = (b'event: error\ndata: {"type":"error","error":{"type":"api_error",'
             b'"message":"upstream connection lost"}}\n\n')
    assert judge(exchange("anthropic", True, 200, cut + error), 10).outcome == "stream_error"
    assert judge(exchange("anthropic", True, 200, cut + error + error), 10).outcome == "malformed"


@pytest.mark.parametrize(("protocol", "status", "body", "headers", "outcome"), [
    ("openai", 502, {"error": {"message": "all failed", "type": "api_error"}}, {}, "error"),
    ("anthropic", 502, {"type": "error", "error": {"type": "api_error", "message": "x"}}, {},
     "error"),
    # the other protocol's error format
    ("anthropic", 502, {"error": {"message": "all failed", "type": "api_error"}}, {},
     "malformed"),
    ("openai", 429, {"error": {"message": "slow down", "type": "rate_limit_error"}},
     {"retry-after": "3"}, "error"),
    ("openai", 429, {"error": {"message": "slow down", "type": "rate_limit_error"}}, {},
     "malformed"),  # no Retry-After
    ("openai", 500, {"error": {"message": "oops", "type": "api_error"}}, {}, "malformed"),
    ("openai", 502, {"error": {"message": "", "type": "api_error"}}, {}, "malformed"),
])
def test_errors_must_be_well_formed_in_the_clients_protocol(
        protocol: str, status: int, body: object, headers: dict[str, str], outcome: str) -> None:
    ex = exchange(protocol, False, status, json.dumps(body).encode(), headers=headers)
    assert judge(ex, 10).outcome == outcome


def test_no_answer_and_a_late_answer_are_violations() -> None:
    lost = exchange("openai", False, 200, b"")
    lost.status, lost.transport_error = None, "ServerDisconnectedError"
    assert judge(lost, 10).outcome == "lost"
    slow = exchange("anthropic", True, 200, ANTHROPIC_STREAM, latency=12.0)
    assert judge(slow, 10).outcome == "late"


def test_an_upstream_call_after_the_commit_is_caught() -> None:
    ex = exchange("anthropic", True, 200, ANTHROPIC_STREAM,
                  headers={"x-claudex-attempts": "beta:500,alpha:200"})
    assert upstream_problem(ex, [(100.01, "beta"), (100.02, "alpha")]) is None
    assert "after the stream was committed" in (
        upstream_problem(ex, [(100.01, "beta"), (100.02, "alpha"), (100.06, "alpha")]) or "")
    # more calls than the trail admits to, and a last call that is not the server's
    assert "trail shows 1" in (upstream_problem(
        exchange("openai", False, 200, b"{}"), [(100.01, "alpha"), (100.02, "alpha")]) or "")
    assert "last upstream call went to beta" in (upstream_problem(
        ex, [(100.01, "alpha"), (100.02, "beta")]) or "")
    # A provider claudex gave up on (its timeout) may read the request it was sent after
    # the backup answered, on a starved event loop; any other outcome may not.
    timed_out = exchange("openai", False, 200, b"{}",
                         headers={"x-claudex-attempts": "beta:timeout,alpha:200",
                                  "x-claudex-provider": "alpha"})
    assert upstream_problem(timed_out, [(100.01, "alpha"), (100.02, "beta")]) is None
    refused = exchange("openai", False, 200, b"{}",
                       headers={"x-claudex-attempts": "beta:server_error,alpha:200",
                                "x-claudex-provider": "alpha"})
    assert "trail beta:server_error,alpha:200" in (upstream_problem(
        refused, [(100.01, "alpha"), (100.02, "beta")]) or "")


def test_the_breaker_model_accepts_the_contract_and_catches_what_breaks_it() -> None:
    model = BreakerModel(threshold=3, recovery_s=1.5, max_recovery_s=6.0)
    for t in (Transition("a", "closed", "open", "3 consecutive failures", 10.0),
              Transition("a", "open", "half_open", "recovery time elapsed", 11.5),
              Transition("a", "half_open", "open", "probe failed; recovery now 3s", 11.6),
              Transition("a", "open", "half_open", "health probe passed", 11.7),
              Transition("a", "half_open", "open", "probe failed; recovery now 6s", 11.8),
              Transition("a", "open", "forced_open", "tripped by operator", 12.0),
              Transition("a", "forced_open", "closed", "reset by operator", 13.0)):
        model.feed(t)
    assert model.violations == [] and model.state("a") == "closed"
    for t in (Transition("b", "closed", "open", "3 consecutive failures", 10.0),
              Transition("b", "open", "half_open", "recovery time elapsed", 11.0),  # too soon
              Transition("b", "half_open", "open", "probe failed; recovery now 1.5s", 11.1),
              Transition("b", "half_open", "closed", "probe succeeded", 12.0),  # out of order
              Transition("b", "closed", "half_open", "recovery time elapsed", 13.0)):
        model.feed(t)
    problems = " | ".join(model.violations)
    assert len(model.violations) == 4, problems
    assert "recovery is 1.5s" in problems and "recovery should be 3s" in problems
    assert "model's state was open" in problems and "not a transition" in problems


def test_the_fault_schedule_is_the_same_for_the_same_seed() -> None:
    def first(seed: int) -> list[str]:
        return [a.describe() for a in itertools.islice(schedule(seed, ("x", "y"), "x"), 50)
                if "HTTP" not in str(a.settings) and "GMT" not in str(a.settings)]

    assert first(3) == first(3) and first(3) != first(4)
    actions = list(itertools.islice(schedule(3, ("x", "y"), "x"), 500))
    assert [a.at for a in actions] == sorted(a.at for a in actions)
    tripped: set[str] = set()
    for action in actions:  # every trip is reset before the same breaker is tripped again
        if action.kind == "trip":
            assert action.target not in tripped
            tripped.add(action.target)
        elif action.kind == "reset":
            tripped.remove(action.target)


@pytest.mark.timeout(240)
async def test_a_30_second_chaos_soak_loses_nothing(tmp_path: Path) -> None:
    report = await run_soak(SoakPlan(requests=None, seconds=30, seed=4), tmp_path)
    summary = json.dumps({**report.to_json(), "rss_samples": "..."}, indent=1)
    assert report.violations == [], summary
    # The memory judge judged: its slope had enough requests (soak/memory_check.py).
    assert report.memory is not None, summary
    assert report.memory.judged_requests >= SLOPE_MIN_REQUESTS, summary
    print("memory:", json.dumps(report.memory.to_json()))  # shown by pytest -rP
    # The soak exercised what it is for: seed 4 trips twice and rotates the token four
    # times in its first 25 s.
    transitions = report.transitions
    assert report.outcomes["ok"] > 1000 and report.failovers > 100, summary
    assert transitions["closed->open"] >= 1 and transitions["half_open->closed"] >= 1, summary
    trips = sum(n for pair, n in transitions.items() if pair.endswith("->forced_open"))
    assert trips >= 1 and report.refreshes >= 1 and report.exit_status == 0, summary
    # Its upstream proxy refused, answered 429 and died (all three in the first 20 s): beta's
    # requests met it out and went on, and the proxy's own breaker opened.
    proxied = report.proxy_attempts
    assert {"proxy_refuses", "proxy_429", "proxy_dies"} <= set(report.actions), summary
    assert proxied["proxy_refused"] >= 1 and proxied["no_route"] >= 1, summary
    assert report.proxy_transitions["closed->open"] >= 1, summary
    assert report.proxy_status.get("requests", 0) > 0, summary
    assert summary_table(report).row_count > 10


def test_a_long_request_sent_again_to_a_backup_known_too_small_is_a_violation() -> None:
    from soak.checks import context_relearned

    def at(started: float, trail: str, protocol: str = "anthropic") -> Exchange:
        ex = exchange(protocol, False, 200, b"{}", headers={"x-claudex-attempts": trail})
        ex.started, ex.ended = started, started + 0.01
        return ex

    learning = at(1.0, "alpha:529,beta:context_exceeded,gamma:200")
    skipped = at(2.0, "alpha:529,beta:context_too_small,gamma:200")
    concurrent = at(1.005, "alpha:529,beta:context_exceeded,gamma:200")  # before it knew
    other_model = at(3.0, "alpha:529,beta:context_exceeded,gamma:200", "openai")
    assert context_relearned([learning, skipped, concurrent, other_model]) == []
    again = at(4.0, "alpha:529,beta:context_exceeded,gamma:200")
    [problem] = context_relearned([learning, skipped, again])
    assert "sent to beta, whose context window claudex learned 2990 ms before" in problem


def test_the_schedule_shrinks_context_windows_below_the_long_prompts_only() -> None:
    from soak.chaos import CONTEXT_WINDOW
    actions = list(itertools.islice(schedule(1, ("alpha", "beta", "gamma"), "alpha"), 400))
    shrinks = [a for a in actions if a.kind == "context_small"]
    assert shrinks and all(a.settings["window"] == CONTEXT_WINDOW for a in shrinks)
    short, long = RequestSpec(7, "anthropic", "alpha", False), \
        RequestSpec(7, "anthropic", "alpha", False, long=True)
    assert len(short.body()) // 4 < CONTEXT_WINDOW < len(long.body()) // 4


def test_a_request_sent_to_a_plan_known_spent_is_a_violation() -> None:
    from soak.checks import spent_window_resent

    def at(started: float, trail: str) -> Exchange:
        ex = exchange("anthropic", False, 200, b"{}", headers={"x-claudex-attempts": trail})
        ex.started, ex.ended = started, started + 0.01
        return ex

    spent = [("alpha", 10.0)]  # alpha's window spent until 10.0
    told = at(1.0, "alpha:plan_limit,beta:200")
    skipped = at(2.0, "alpha:window_spent,beta:200")
    concurrent = at(1.005, "alpha:plan_limit,beta:200")  # sent before claudex knew
    after_reset = at(9.5, "alpha:200")  # within the reset's rounding: not judged
    assert spent_window_resent([told, skipped, concurrent, after_reset], spent) == []
    again = at(4.0, "alpha:plan_limit,beta:200")
    served = at(5.0, "alpha:200")
    problems = spent_window_resent([told, again, served], spent)
    assert len(problems) == 2
    assert "sent to alpha (plan_limit), whose window claudex knew was spent 2990 ms" in \
        problems[0]
    # An operator's reset ends the mark (docs/subscriptions.md): the plan may be tried again,
    # and what that try is told is known from then on.
    [problem] = spent_window_resent([told, again, served], spent, [("alpha", 3.5)])
    assert "sent to alpha (200), whose window claudex knew was spent 990 ms" in problem
    assert len(spent_window_resent([told, again, served], spent, [("beta", 3.5)])) == 2
    # Told by a spell that reset before the answer ended (it failed over slowly), while
    # another spell began: what the next one meets is the new spell, which claudex was not told.
    slow_told = at(11.0, "alpha:plan_limit,beta:200")
    slow_told.ended = 12.5
    two_spells = [("alpha", 10.0), ("alpha", 12.0), ("alpha", 16.0)]
    assert spent_window_resent([slow_told, at(12.6, "alpha:plan_limit,beta:200")],
                               two_spells) == []
    # Passed over as slow (`avoid_slow`): nothing was sent.
    assert spent_window_resent([told, at(4.0, "alpha:slow,beta:200")], spent) == []


def test_a_slow_spell_steps_up_and_recovers_with_no_other_fault_mode_meanwhile() -> None:
    from soak.chaos import _NOT_MODES, SLOW_STEPS_MS, fault_of

    actions = list(itertools.islice(schedule(3, ("alpha", "beta", "gamma"), "alpha"), 1500))
    assert [a.at for a in actions] == sorted(a.at for a in actions)
    spells: dict[str, list[float]] = {}
    done = 0
    for action in actions:
        steps = spells.get(action.target)
        if action.kind == "turns_slow":
            steps = spells.setdefault(action.target, [])
            steps.append(action.settings["latency_ms"])
            assert fault_of(action) == ("slow", {"latency_ms": steps[-1]})
        elif action.kind == "recovers":
            assert steps == list(SLOW_STEPS_MS) and fault_of(action) == ("ok", {})
            del spells[action.target]
            done += 1
        elif steps is not None:
            assert action.kind in _NOT_MODES | {"reset"}, action.describe()
    assert done >= 3


def test_the_schedule_spends_windows_and_the_fake_refuses_until_the_reset() -> None:
    from claudex.demo.fake_provider import FakeProvider
    from soak.chaos import spend_window

    actions = list(itertools.islice(schedule(1, ("alpha", "beta", "gamma"), "alpha"), 400))
    spends = [a for a in actions if a.kind == "window_spent"]
    assert spends and all(1.0 <= a.settings["duration_s"] <= 4.0 for a in spends)
    fake = FakeProvider("beta", "openai")
    spend_window(fake, {"duration_s": 2.0})
    assert fake.plan is not None and fake.plan.kind == "chatgpt"
    refused = fake.plan.refusal()
    assert refused is not None and refused[1]["error"]["type"] == "usage_limit_reached"


def test_the_schedule_has_the_proxy_refuse_429_and_die_and_come_back_before_the_next() -> None:
    from soak.chaos import PROXY_ACTIONS, proxy_mode_of

    names = ("alpha", "beta", "gamma")
    # Without a proxy (the fleet soak's), no proxy action at all.
    assert not any(a.kind in PROXY_ACTIONS
                   for a in itertools.islice(schedule(4, names, "alpha"), 500))
    actions = list(itertools.islice(schedule(4, names, "alpha", "corp"), 800))
    assert [a.describe() for a in actions[:200]] == [
        a.describe() for a in itertools.islice(schedule(4, names, "alpha", "corp"), 200)]
    on_proxy = [a for a in actions if a.kind in PROXY_ACTIONS]
    assert all(a.target == "corp" for a in on_proxy)
    # The first three are one of each, all within the CI's 30 s; each ends before the next.
    assert sorted(a.kind for a in on_proxy[:6:2]) == ["proxy_429", "proxy_dies",
                                                       "proxy_refuses"]
    assert on_proxy[5].at < 30
    for fault, back in zip(on_proxy[::2], on_proxy[1::2], strict=False):
        assert back.kind == "proxy_back" and fault.kind != "proxy_back"
        assert back.at == round(fault.at + fault.settings["duration_s"], 3)
        mode, settings = proxy_mode_of(fault)
        if fault.kind == "proxy_dies":
            assert mode == "down" and 5 <= fault.settings["duration_s"] <= 8
        elif fault.kind == "proxy_429":
            assert mode == "rate_limited" and 0 < settings["retry_after"] <= 1.0
        else:
            assert mode == "down" and fault.settings["duration_s"] <= 3
        assert proxy_mode_of(back) == ("ok", {})


def test_a_proxy_failure_charged_to_its_provider_or_a_bypass_is_a_violation() -> None:
    from collections import Counter

    from soak.checks import proxy_problems

    def at(started: float, trail: str, served: str = "gamma") -> Exchange:
        ex = exchange("openai", False, 200, b"{}",
                      headers={"x-claudex-attempts": trail, "x-claudex-provider": served})
        ex.started, ex.ended = started, started + 0.05
        return ex

    out = [(10.0, 13.0)]  # the proxy refused from 10 to 13
    fine = [at(10.5, "beta:proxy_refused,gamma:200"), at(11.0, "beta:no_route,gamma:200"),
            at(20.0, "beta:500,gamma:200")]  # beta's own fault, the proxy fine again
    seen: Counter[str] = Counter()
    kwargs = {"tunnels": 5, "tls_connections": 5, "cuts": [10.0], "proxy_out": out,
              "disturbed": [(19.0, 22.0)]}
    assert proxy_problems(fine, "beta", seen, opens=[("beta", 20.5), ("gamma", 11.0)],
                          **kwargs) == []  # type: ignore[arg-type]
    assert seen == Counter({"proxy_refused": 1, "no_route": 1})
    charged = [at(11.0, "beta:connect_error,gamma:200"), at(12.0, "gamma:proxy_refused")]
    problems = proxy_problems(charged, "beta", Counter(), opens=[("beta", 13.5)],
                              **kwargs)  # type: ignore[arg-type]
    assert len(problems) == 3, problems
    assert "beta:connect_error while only its proxy was out" in problems[0]
    assert "gamma is direct" in problems[1] and "breaker opened" in problems[2]
    # A request in flight when the proxy went down (its tunnel cut) is counted, not judged,
    # and so is the breaker opening soon after that.
    cut = Counter[str]()
    assert proxy_problems([at(9.99, "beta:disconnected,gamma:200")], "beta", cut,
                          opens=[("beta", 12.5)], **kwargs) == []  # type: ignore[arg-type]
    assert cut == Counter({"cut in flight": 1, "breaker opened after a cut": 1})
    bypass = proxy_problems([], "beta", Counter(), opens=[],
                            **{**kwargs, "tls_connections": 6})  # type: ignore[arg-type]
    assert ["some went around the proxy" in p for p in bypass] == [True]


def test_a_request_drawn_for_one_profile_is_the_mix_s_request_addressed_there() -> None:
    # The warm-up's proxied bursts (soak/run.py) address every request to beta; the rest of
    # each request (protocol, stream, length) is the mix's, so both paths are warmed.
    for request_id in range(200):
        drawn = RequestSpec.draw(3, request_id)
        to_beta = RequestSpec.draw(3, request_id, "beta")
        assert to_beta.profile == "beta"
        assert (to_beta.protocol, to_beta.stream, to_beta.long) == (
            drawn.protocol, drawn.stream, drawn.long)
