"""The control routes of a fake provider: `GET /_fake/state`, `GET /_fake/requests` (every
request recorded, credentials masked, with the status answered), `POST /_fake/fault`,
`POST /_fake/reset`, and `POST /_fake/echo_key` (`{"on": true}`: error answers quote the
credential the request presented, for tests that claudex never passes a secret on), and
`POST /_fake/plan` (`{"spend_s": 8}`: the subscription plan's window is spent, resetting 8 s
later; `{"kind": "claude" | "chatgpt"}` makes the fake a subscription first, when it is none).

They let another process (a demo terminal, a benchmark) switch a `FakeProvider`'s faults; they
ignore faults themselves and are not recorded in `requests`. They know the fake by what they read
and set of it (`ControlledFake`), so this module does not import the provider's.
"""

from __future__ import annotations

from typing import Any, Protocol

from aiohttp import web

from claudex.demo.fake_plans import Plan
from claudex.demo.fake_replies import Protocol as ApiProtocol
from claudex.demo.faults import FaultConfigError, FaultState, make_fault_state
from claudex.demo.recording import RecordedRequest, parse_json_body


class ControlledFake(Protocol):
    """What the control routes read and set of a fake provider (`FakeProvider` is one)."""

    protocol: ApiProtocol
    plan: Plan | None
    requests: list[RecordedRequest]
    faults: FaultState
    echo_key: bool

    def state(self) -> dict[str, Any]: ...

    def reset_log(self) -> None: ...


async def control_response(fake: ControlledFake, request: web.BaseRequest) -> web.Response:
    """Answer a request under `/_fake/` for `fake`."""
    path, method = request.path, request.method
    if path == "/_fake/state" and method == "GET":
        return web.json_response(fake.state())
    if path == "/_fake/requests" and method == "GET":
        return web.json_response({"requests": [r.summary() for r in fake.requests]})
    if path == "/_fake/reset" and method == "POST":
        fake.faults = FaultState()
        fake.reset_log()
        fake.echo_key = False
        return web.json_response(fake.state())
    if path == "/_fake/echo_key" and method == "POST":
        body = parse_json_body(await request.read())
        if not isinstance(body, dict) or not isinstance(body.get("on"), bool):
            return web.json_response({"error": 'expected {"on": true|false}'}, status=400)
        fake.echo_key = body["on"]
        return web.json_response({"echo_key": body["on"]})
    if path == "/_fake/plan" and method == "POST":
        body = parse_json_body(await request.read())
        spend = body.get("spend_s") if isinstance(body, dict) else None
        kind = body.get("kind") if isinstance(body, dict) else None
        if (spend is not None and (isinstance(spend, bool) or not isinstance(spend, int | float)
                                   or spend <= 0)) or kind not in (None, "claude", "chatgpt"):
            return web.json_response(
                {"error": 'expected {"spend_s": seconds > 0, "kind": "claude" | "chatgpt"}'},
                status=400)
        if fake.plan is None:
            plan_kind = kind or ("claude" if fake.protocol == "anthropic" else "chatgpt")
            fake.plan = Plan.claude() if plan_kind == "claude" else Plan.chatgpt()
        if spend is not None:
            fake.plan.spend(float(spend))
        return web.json_response(fake.plan.to_json())
    if path == "/_fake/fault" and method == "POST":
        body = parse_json_body(await request.read())
        if not isinstance(body, dict) or "mode" not in body:
            return web.json_response({"error": 'expected a JSON object with "mode"'}, status=400)
        settings = {key: value for key, value in body.items() if key != "mode"}
        try:
            state = make_fault_state(body["mode"], settings, valid_tokens=fake.faults.valid_tokens)
        except FaultConfigError as error:
            return web.json_response({"error": str(error)}, status=400)
        fake.faults = state
        return web.json_response(fake.state())
    return web.json_response({"error": f"no control route {method} {path}"}, status=404)
