"""The hot path's call budget: how many of claudex's own function calls one request makes.

A time would differ from machine to machine and run to run; the number of calls does not
(cProfile's call counts, filtered to the claudex package, for a pass-through and a translated
non-streamed request through the server's ASGI app with the default config, history on:
bench/request_cost.py). Each feature that adds work to every request shows here first.

The figures below are a decision, not a measurement to keep up with: raising one goes in its own
commit that says why (what a request now does that it did not, and what it costs in
`make bench`). When a change lowers the count, lower the figure with it. `calls_by_function`
in tests/call_budget.json is the per-function count the figure was set with, so a failure
names the functions that grew.
"""

from __future__ import annotations

import json
from collections import Counter

from bench.request_cost import calls_per_request
from tests.paths import TESTS

BUDGET = {
    "pass-through": 137,  # Anthropic client -> Anthropic provider, JSON answer
    "translated": 171,    # Anthropic client -> OpenAI-compatible provider, JSON answer
}
BASELINE = TESTS / "call_budget.json"
REQUESTS = 200


def _grown(label: str, by_function: Counter[str]) -> list[str]:
    known = json.loads(BASELINE.read_text(encoding="utf-8"))["calls_by_function"][label]
    lines = []
    for func, count in sorted(by_function.items()):
        now, then = count / REQUESTS, known.get(func, 0.0)
        if now > then:
            lines.append(f"  {func}: {then:g} -> {now:g} per request")
    return lines


def test_one_request_makes_no_more_calls_than_its_budget() -> None:
    measured = calls_per_request(REQUESTS)
    over = []
    for label, budget in BUDGET.items():
        per, by_function = measured[label]
        if per > budget:
            over.append(f"{label}: {per:g} claudex calls per request, budget {budget}; "
                        "grown:\n" + "\n".join(_grown(label, by_function) or ["  (none?)"]))
    assert not over, ("the hot path makes more calls than its budget (tests/test_call_budget.py"
                      " says how to raise it on purpose):\n" + "\n".join(over))


def test_the_count_is_exact_for_equal_requests() -> None:
    """The figure must not depend on timing: equal requests make equal numbers of calls."""
    first = calls_per_request(REQUESTS)
    again = calls_per_request(REQUESTS)
    assert {k: v[0] for k, v in first.items()} == {k: v[0] for k, v in again.items()}


if __name__ == "__main__":  # writes the baseline the figures were set with
    measured = calls_per_request(REQUESTS)
    BASELINE.write_text(json.dumps({"calls_by_function": {
        label: {func: count / REQUESTS for func, count in sorted(by.items())}
        for label, (_per, by) in measured.items()}}, indent=1) + "\n", encoding="utf-8")
    print({label: per for label, (per, _by) in measured.items()})
