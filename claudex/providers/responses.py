"""The OpenAI Responses protocol (`POST {base_url}/responses`): URLs, error bodies, stream
markers. Shared by both directions: a Responses provider behind claudex, and a Responses
client (Codex CLI, the openai SDK's `client.responses`) in front of it.

Errors come in three shapes: the platform API's `{"error": {"message", "type", "param",
"code"}}` (Chat Completions' shape), the ChatGPT backend's `{"detail": "..."}`, and in a stream
an `error` event (`{"type": "error", "code", "message", "param", "sequence_number"}`) or a
`response.failed` event whose `response.error` holds `{"code", "message"}`.

Commit rule (DESIGN.md): the first output text delta, refusal delta or function-call item is
content; `response.created`, `response.in_progress`, reasoning items and their summaries are
not. A terminal `response.completed`/`response.incomplete` before any of those is a complete
(empty) answer, so it commits as well.
"""

from __future__ import annotations

import json
from typing import Any

from claudex.providers import openai
from claudex.providers.sse import SseEvent, StreamSignal, TailScanner

# Output item types that are content the moment they are announced (their arguments follow).
CALL_ITEM_TYPES = frozenset({"function_call", "custom_tool_call", "local_shell_call"})
CONTENT_DELTA_EVENTS = frozenset({
    "response.output_text.delta", "response.refusal.delta",
    "response.function_call_arguments.delta", "response.custom_tool_call_input.delta",
})
TERMINAL_EVENTS = frozenset({"response.completed", "response.incomplete"})
ERROR_EVENTS = frozenset({"error", "response.failed"})


def is_chatgpt_backend(base_url: str, oauth_provider: str | None) -> bool:
    """Whether requests go to the ChatGPT (Codex subscription) backend, which only streams,
    refuses `max_output_tokens` and sampling settings, and needs `store: false`: a Codex
    login, or its host."""
    return oauth_provider == "codex" or "://chatgpt.com/" in base_url


_INSTRUCTION_ROLES = frozenset({"system", "developer"})


def _instruction_text(item: Any) -> str | None:
    """The text of a system or developer message item, or None when it is not one (or holds
    more than text, which stays in the input)."""
    if not isinstance(item, dict) or item.get("type", "message") != "message" \
            or item.get("role") not in _INSTRUCTION_ROLES:
        return None
    content = item.get("content")
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return None
    texts = []
    for part in content:
        if not isinstance(part, dict) or part.get("type") not in ("input_text", "text") \
                or not isinstance(part.get("text"), str):
            return None
        texts.append(part["text"])
    return "\n\n".join(t for t in texts if t)


def chatgpt_changes(body: dict[str, Any]) -> dict[str, Any]:
    """What a Responses request needs before the ChatGPT backend takes it: an `input` list (a
    string becomes one user message) and a top-level `instructions` string, made of the
    system and developer messages before the first other item ("" when there are none).
    That backend refuses a request without `instructions` (400 {"detail": "Instructions are
    required"}: pwnkit PR 330, llxprt-code issue 1197) and an `input` that is no list (400
    {"detail": "Input must be a list"}: cubezhao/ai-tools-mng issue 79); Codex CLI always
    sends both (openai/codex codex-rs/codex-api/src/requests/responses.rs). A request that
    already has `instructions` is left as its client wrote it."""
    changes: dict[str, Any] = {}
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user",
                  "content": [{"type": "input_text", "text": items}]}]
        changes["input"] = items
    if body.get("instructions") is None:
        lifted: list[str] = []
        if isinstance(items, list):
            for item in items:
                text = _instruction_text(item)
                if text is None:
                    break
                lifted.append(text)
            if lifted:
                changes["input"] = items[len(lifted):]
        changes["instructions"] = "\n\n".join(t for t in lifted if t)
    return changes


def responses_url(base_url: str) -> str:
    return f"{base_url.rstrip('/')}/responses"


def models_url(base_url: str) -> str:
    return f"{base_url.rstrip('/')}/models"


# Bodies in the client direction have Chat Completions' error shape.
error_type_for = openai.error_type_for
error_body = openai.error_body


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _payload(data: str) -> dict[str, Any] | None:
    try:
        value = json.loads(data)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def error_fields(value: object) -> tuple[str | None, str | None]:
    """(message, code) from any of the three error shapes (body, `error` event,
    `response.failed` event); (None, None) when `value` holds none."""
    if not isinstance(value, dict):
        return None, None
    kind = value.get("type")
    if kind == "response.failed":
        response = value.get("response")
        err = response.get("error") if isinstance(response, dict) else None
        if isinstance(err, dict):
            return _text(err.get("message")) or "response failed", _text(err.get("code"))
        return "response failed", None
    if kind == "error":
        return _text(value.get("message")) or "error event", _text(value.get("code"))
    err = value.get("error")
    if isinstance(err, dict):
        return _text(err.get("message")), _text(err.get("code")) or _text(err.get("type"))
    if isinstance(err, str) and err:
        return err, None
    detail = value.get("detail")
    if isinstance(detail, str) and detail:
        return detail, None
    if isinstance(detail, dict):  # some gateways nest the error one level down
        return _text(detail.get("message")), _text(detail.get("code"))
    return None, None


def error_message(body: bytes) -> str:
    """The upstream's own error message, for attempt records (never the whole body)."""
    try:
        message, _ = error_fields(json.loads(body))
    except (ValueError, RecursionError):
        message = None
    if message:
        return message[:300]
    return body[:200].decode("utf-8", "replace").strip()


def sse_error(message: str, code: str = "server_error", sequence_number: int = 0) -> bytes:
    """An `error` event for a Responses client's stream."""
    payload = json.dumps({"type": "error", "code": code, "message": message, "param": None,
                          "sequence_number": sequence_number})
    return f"event: error\ndata: {payload}\n\n".encode()


def event_type(event: SseEvent, payload: dict[str, Any] | None) -> str:
    """The event's type: the `event:` line, else the payload's `type` (both are sent)."""
    if event.event:
        return event.event
    kind = payload.get("type") if payload is not None else None
    return kind if isinstance(kind, str) else ""


def signal(event: SseEvent) -> tuple[StreamSignal, str]:
    payload = _payload(event.data) if event.data else None
    kind = event_type(event, payload)
    if kind in CONTENT_DELTA_EVENTS or kind in TERMINAL_EVENTS:
        return StreamSignal.CONTENT, ""
    if kind == "response.output_item.added" and payload is not None:
        item = payload.get("item")
        if isinstance(item, dict) and item.get("type") in CALL_ITEM_TYPES:
            return StreamSignal.CONTENT, ""
        return StreamSignal.NONE, ""
    if kind in ERROR_EVENTS:
        message, _ = error_fields(payload if payload is not None else {"type": kind})
        return StreamSignal.ERROR, message or "error event"
    return StreamSignal.NONE, ""


def tail_scanner() -> TailScanner:
    # Markers start at a line break: inside JSON text a newline is escaped, so model output
    # that merely mentions them cannot match.
    return TailScanner(
        (b"\nevent: error", b"\nevent: response.failed", b'\ndata: {"type":"error"',
         b'\ndata: {"type": "error"', b'\ndata: {"type":"response.failed"',
         b'\ndata: {"type": "response.failed"'),
        (b"\nevent: response.completed", b"\nevent: response.incomplete",
         b'\ndata: {"type":"response.completed"', b'\ndata: {"type": "response.completed"',
         b'\ndata: {"type":"response.incomplete"', b'\ndata: {"type": "response.incomplete"'),
    )
