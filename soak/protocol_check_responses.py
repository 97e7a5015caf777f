"""What a complete, well-formed answer looks like to a Responses API client (Codex CLI, the
openai SDK's `client.responses`): the third protocol of the soak's oracle (`protocol_check`
has the other two and the shared SSE framing).

A stream: `response.created` first; every event named by its `event:` line and its `type`
alike, `sequence_number` counting up from 0; output items added with indices counting up from
0, every delta aimed at an item that was added and is not done yet, each text's done event
holding exactly its deltas; then `response.completed` (or `response.incomplete`) last, listing
every item that was done — or one `response.failed` / `error` event, last.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from soak.protocol_check import _json, error_message, require, sse_events

TERMINAL: Final = frozenset({"response.completed", "response.incomplete"})
FAILED: Final = frozenset({"response.failed", "error"})
ITEM_TYPES: Final = frozenset({"message", "function_call", "custom_tool_call",
                               "local_shell_call", "reasoning"})


@dataclass
class ResponsesSummary:
    text: str = ""
    items: list[dict[str, Any]] = field(default_factory=list)
    status: str | None = None
    usage: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


def _failure(event: dict[str, Any]) -> dict[str, Any]:
    if event["type"] == "error":
        message = event.get("message")
        require(isinstance(message, str) and message.strip(), "error event without a message")
        return {"message": message, "code": event.get("code")}
    response = event.get("response")
    require(isinstance(response, dict), "response.failed without a response")
    assert isinstance(response, dict)
    error = response.get("error")
    require(isinstance(error, dict) and isinstance(error.get("message"), str)
            and error["message"].strip(), "response.failed without an error message")
    assert isinstance(error, dict)
    return dict(error)


def validate_responses(raw: bytes) -> ResponsesSummary:
    summary = ResponsesSummary()
    events = []
    for name, data in sse_events(raw):
        payload = _json(data)
        require(isinstance(payload, dict) and name == payload.get("type"),
                "event name and data type differ")
        events.append(payload)
    require(events, "an empty stream")
    for position, event in enumerate(events):
        require(event.get("sequence_number") == position,
                f"sequence_number {event.get('sequence_number')} at event {position}")
    if events[0]["type"] in FAILED:
        require(len(events) == 1, "events after a failure")
        summary.error = _failure(events[0])
        return summary
    require(events[0]["type"] == "response.created", "stream must open with response.created")
    added: list[dict[str, Any]] = []
    done: dict[int, dict[str, Any]] = {}
    texts: dict[int, str] = {}
    for position, event in enumerate(events[1:], start=1):
        kind, last = event["type"], position == len(events) - 1
        index = event.get("output_index")
        if kind in FAILED:
            require(last, "a failure ends the stream")
            summary.error = _failure(event)
            return summary
        if kind == "response.output_item.added":
            require(index == len(added), "output indices must count up from 0")
            require(event["item"].get("type") in ITEM_TYPES, "an unknown output item")
            added.append(event["item"])
        elif kind in ("response.content_part.added", "response.output_text.delta",
                      "response.output_text.done", "response.content_part.done",
                      "response.function_call_arguments.delta",
                      "response.function_call_arguments.done"):
            require(isinstance(index, int) and index < len(added) and index not in done,
                    f"{kind} for an item not open")
            assert isinstance(index, int)
            if kind == "response.output_text.delta":
                texts[index] = texts.get(index, "") + event["delta"]
            elif kind == "response.output_text.done":
                require(event["text"] == texts.get(index, ""), "text done differs from deltas")
        elif kind == "response.output_item.done":
            require(isinstance(index, int) and index < len(added) and index not in done,
                    "output_item.done for an item not open")
            assert isinstance(index, int)
            done[index] = event["item"]
        elif kind in TERMINAL:
            require(last, f"{kind} must end the stream")
            require(len(done) == len(added), "the stream ended with items still open")
            response = event["response"]
            require(response.get("output") == [done[i] for i in range(len(added))],
                    "the final output differs from the items done")
            summary.status = response.get("status")
            summary.usage = response.get("usage")
        elif kind not in ("response.in_progress", "response.refusal.delta",
                          "response.refusal.done", "response.reasoning_summary_text.delta"):
            require(kind.startswith("response."), f"unknown event {kind}")
    require(events[-1]["type"] in TERMINAL, "stream ended without response.completed")
    summary.items = [done[i] for i in range(len(added))]
    summary.text = "".join(texts.values())
    return summary


def validate_response_object(payload: Any) -> None:
    """A complete non-streamed Responses API answer."""
    require(isinstance(payload, dict) and payload.get("object") == "response",
            "not a response object")
    require(isinstance(payload.get("id"), str) and payload["id"], "a response without an id")
    require(payload.get("status") in ("completed", "incomplete"), "missing or unknown status")
    output = payload.get("output")
    require(isinstance(output, list) and output, "no output items")
    for item in output:
        require(isinstance(item, dict) and item.get("type") in ITEM_TYPES, "unknown output item")
    require(isinstance(payload.get("usage"), dict), "no usage")


def responses_error_message(payload: Any) -> str:
    """A Responses client's error bodies have Chat Completions' shape."""
    return error_message("responses", payload)
