"""How the `[router]` asks its classifier profile: one small request in the profile's own
protocol (so `[router] model` is sent as written, and nothing is translated), served by the
engine like any other request to `/proxy/PROFILE/...` with failover off — the profile's
credentials, breaker, limits and request log apply — and the text of its answer.

A ChatGPT-backend profile (OpenAIResponses with the Codex login) does not serve as a classifier:
that backend answers only streamed requests, and this one is not.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Final

from claudex.config.model import Profile, RouterSettings
from claudex.engine.core.request import Endpoint, ForwardResult, ProxyRequest
from claudex.engine.routing.intents import classifier_prompt
from claudex.providers import fastjson

ANSWER_TOKENS: Final = 16
"""Room for one word and a reasoning model's preamble; Claudex asks for 10."""
ROUTE: Final = "(router classifier)"
"""What the classifier's requests show as the route the client used."""
_ENDPOINTS: Final[Mapping[str, Endpoint]] = {
    "anthropic": "messages", "openai": "chat", "responses": "responses"}

Forward = Callable[[ProxyRequest], Awaitable[ForwardResult]]


class ClassifierFailed(Exception):
    """The classifier's request did not come back with an answer; the message says why."""


class ProfileClassifier:
    """`IntentRouter`'s `Ask`: the question put to `settings.profile` through `forward`."""

    def __init__(self, settings: RouterSettings, profile_of: Callable[[str], Profile | None],
                 forward: Forward) -> None:
        self.settings = settings
        self._profile_of = profile_of
        self._forward = forward
        self._prompt = classifier_prompt(settings.categories)

    async def __call__(self, question: str, credentials: Mapping[str, str]) -> str:
        name = self.settings.profile or ""
        profile = self._profile_of(name)
        if profile is None:
            raise ClassifierFailed(f"no profile named {name!r}")
        model = self.settings.model or profile.default_model
        if model is None:
            raise ClassifierFailed(f"{name} has no default_model and [router] names no model")
        req = classifier_request(profile, model, self._prompt, question, credentials)
        result = await self._forward(req)
        if result.status >= 400 or result.body is None:
            last = result.attempts[-1] if result.attempts else None
            why = f"{last.label()}: {last.message}" if last and last.message else \
                (last.label() if last else str(result.status))
            raise ClassifierFailed(why)
        return answer_text(profile.protocol, result.body)


def classifier_request(profile: Profile, model: str, prompt: str, question: str,
                       credentials: Mapping[str, str]) -> ProxyRequest:
    """The question for `profile`, in its own protocol; `credentials` are the client's (sent
    only when the profile is `auth_type = "passthrough"`, as for any request)."""
    protocol = profile.protocol
    body: dict[str, Any]
    if protocol == "anthropic":
        body = {"model": model, "max_tokens": ANSWER_TOKENS, "temperature": 0,
                "system": prompt, "messages": [{"role": "user", "content": question}]}
    elif protocol == "openai":
        body = {"model": model, "max_tokens": ANSWER_TOKENS, "temperature": 0,
                "messages": [{"role": "system", "content": prompt},
                             {"role": "user", "content": question}]}
    else:
        body = {"model": model, "max_output_tokens": ANSWER_TOKENS, "store": False,
                "instructions": prompt, "input": question}
    return ProxyRequest(protocol=protocol, endpoint=_ENDPOINTS[protocol], body=body,
                        raw=fastjson.dumps(body), headers=dict(credentials),
                        profile=profile.name, failover=False, route=ROUTE)


def answer_text(protocol: str, payload: bytes) -> str:
    """The text of a non-streamed answer in `protocol` ("" when it has none)."""
    try:
        body = json.loads(payload)
    except ValueError:
        raise ClassifierFailed("its answer is not JSON") from None
    if not isinstance(body, dict):
        return ""
    if protocol == "anthropic":
        return " ".join(block["text"] for block in body.get("content") or ()
                        if isinstance(block, dict) and isinstance(block.get("text"), str))
    if protocol == "openai":
        choices = body.get("choices")
        message = choices[0].get("message") if isinstance(choices, list) and choices \
            and isinstance(choices[0], dict) else None
        content = message.get("content") if isinstance(message, dict) else None
        return content if isinstance(content, str) else ""
    texts = []
    for item in body.get("output") or ():
        for part in item.get("content") or () if isinstance(item, dict) else ():
            if isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
    return " ".join(texts)
