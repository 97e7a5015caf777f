"""How one request is expressed to one provider and how its answer comes back.

`Exchange` hides whether the client and the provider speak the same protocol. When they do,
bodies pass through untouched (re-encoded only when the model or `max_tokens` changes, or when
thinking blocks another provider signed are dropped: `claudex.providers.thinking`) and a
stream is relayed byte for byte; when they differ, `claudex.providers.translate` rewrites the
request, the answer, error bodies and the stream as it flows. The model name, headers and query
string a provider gets are decided in `claudex.engine.core.addressing`; the same-protocol stream
codec is `claudex.engine.core.stream_codec.Relay`.
"""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from claudex.config.model import Profile
from claudex.config.model import Protocol as WireProtocol
from claudex.engine.addons.reasoning_memory import (
    ReasoningMemory,
    carry_reasoning,
    remember_output,
    stream_listener,
)
from claudex.engine.addons.signatures import SignatureMemory
from claudex.engine.clouds.wire import Refusal, Wire, WireRequest
from claudex.engine.core.addressing import credentials_only, map_model, upstream_headers, with_query
from claudex.engine.core.request import ProxyRequest
from claudex.engine.core.stream_codec import Relay, StreamCodec
from claudex.engine.credentials.auth_headers import AuthHeaders
from claudex.providers import anthropic, fastjson, openai, responses
from claudex.providers import translate as tr
from claudex.providers.thinking import make_portable
from claudex.providers.usage_chunks import asked_for_usage
from claudex.providers.validation_problems import InvalidRequest, Problem

log = logging.getLogger("claudex.translate")


# Compact JSON through orjson; a lone surrogate (`"\ud800"` in the client's JSON) has no UTF-8
# form and goes escaped, as the client wrote it, for the provider to judge.
_dumps = fastjson.dumps


_USAGE_ASKED = b'"stream_options":{"include_usage":true},'


def ask_for_usage(raw: bytes) -> bytes:
    """A Chat request object without `stream_options`, with `stream_options.include_usage`
    written in as its first member: no re-encoding of the rest (a request always has members,
    so the comma is right)."""
    at = raw.index(b"{") + 1
    member = _USAGE_ASKED if not raw[at:].lstrip().startswith(b"}") else _USAGE_ASKED[:-1]
    return raw[:at] + member + raw[at:]


class Exchange:
    """One request at one provider: body out, answer back, in the client's protocol."""

    def __init__(self, req: ProxyRequest, profile: Profile, *, addressed: bool,
                 aliases: Mapping[str, str] | None = None,
                 max_tokens_cap: int | None = None) -> None:
        self.req = req
        self.profile = profile
        self.client: WireProtocol = req.protocol
        self.upstream: WireProtocol = profile.protocol
        self.translating = self.client != self.upstream
        # The ChatGPT (Codex subscription) backend only streams: a client that did not ask
        # for a stream gets the collected answer as JSON.
        self.chatgpt = self.upstream == "responses" and responses.is_chatgpt_backend(
            profile.base_url, profile.oauth_provider)
        self.upstream_streams = req.stream or self.chatgpt
        self.addressed = addressed
        model = map_model(profile, req.model, addressed, aliases, client=req.protocol)
        # Interned: the attempt keeps it, and the event bus's backlog keeps 2,000 attempts.
        self.model = None if model is None else sys.intern(model)
        # The profile's `max_tokens`, or a lower limit the provider stated in a 400.
        self.max_tokens_cap = max_tokens_cap
        self._tool_names = tr.ToolNameMap()
        # What the body sent upstream leaves out of the client's request, by short name.
        self.dropped: tuple[str, ...] = ()
        # Who signed which thinking block (the engine's, set by the forwarder), and what
        # making the conversation valid here changed ("dropped: thinking (signed by b)").
        self.signatures: SignatureMemory | None = None
        self.portable_notes: tuple[str, ...] = ()
        self._query = urlencode(dict(profile.query_params)) if profile.query_params else ""

    # -- request ---------------------------------------------------------------------------------

    def headers(self, auth: AuthHeaders | None) -> dict[str, str]:
        req = self.req
        headers = {"content-type": "application/json"}
        if self.upstream_streams:
            headers["accept"] = "text/event-stream"
        # anthropic-version/-beta are carried over only between Anthropic-protocol ends; the
        # client's credentials only to a passthrough profile (upstream_headers decides).
        client = credentials_only(req.headers) if self.translating else req.headers
        headers.update(upstream_headers(self.profile, auth, client=client,
                                        forward=not self.translating))
        if self.wire is not None:
            return self.wire.headers(headers, self.on_wire)
        return headers

    def url(self) -> str:
        """The upstream URL: the client's query string rides along on the same-protocol path
        (Claude Code's `?beta=true`); the profile's `query_params` always (Azure's
        `api-version`). A cloud's wire (engine/clouds/) has its own: no client query there."""
        if self.wire is not None and (own := self.wire.url(self.on_wire)) is not None:
            return with_query(own, self._query)
        if self.upstream == "anthropic":
            url = anthropic.messages_url(self.profile.base_url,
                                         self.req.endpoint == "count_tokens")
        elif self.upstream == "responses":
            url = responses.responses_url(self.profile.base_url)
        else:
            url = openai.chat_url(self.profile.base_url)
        return with_query(url, "" if self.translating else self.req.query, self._query)

    # Bedrock's or Vertex's URL, body, signer and stream decoder (engine/clouds/), set by the
    # forwarder from the provider's runtime; None: the protocol's own wire.
    wire: Wire | None = None
    # The cloud's last refusal read here (a field it does not take, ...): what to learn.
    refused: Refusal | None = None

    @property
    def on_wire(self) -> WireRequest:
        """What the wire reads of this request."""
        return WireRequest(self.model, self.upstream_streams, self.req.endpoint == "count_tokens",
                           self.req.headers.get("anthropic-beta"))

    # The body went as the client's bytes with one member written in (`ask_for_usage`): exact,
    # whatever orjson read.
    _spliced = False

    # How a Responses client's answer comes back (set with the body; `_responses_client_body`),
    # and the stream translator made from it.
    _responses: tr.ResponsesRequest | None = None
    _responses_codec: tr.ResponsesStream | None = None
    _responses_tap: tr.ReasoningTap | None = None

    def body(self) -> bytes:
        """The request body for this provider. Raises InvalidRequest when the client's request
        is malformed in a way only translation notices (nothing is sent anywhere then)."""
        try:
            out = self._build()
            if out is not self.req.raw and not self._spliced and fastjson.lossy(self.req.body):
                # Re-encoded, and the body may hold an integer beyond 64 bits that orjson read
                # as a float: build it again from an exact reading of the client's bytes.
                self.req.body = json.loads(self.req.raw)
                self._reset()
                out = self._build()
            if self.wire is not None:
                return self._for_wire(self.wire, out)
            return out
        except InvalidRequest:
            raise
        except RecursionError:
            # JSON nested close to the parser's limit parses, but re-encoding it one call
            # deeper does not.
            raise InvalidRequest(Problem((), "nesting")) from None
        except Exception:
            # A claudex bug: the caller fails over; the traceback belongs in the log.
            log.exception("%s: could not build the request for %s", self.profile.name,
                          self.upstream)
            raise

    def _for_wire(self, wire: Wire, built: bytes) -> bytes:
        """The Anthropic body built for this request, rewritten for the cloud's wire (what it
        leaves out joins `dropped`)."""
        body = self.req.body if built is self.req.raw else json.loads(built)
        rewritten, dropped = wire.body(body, self.on_wire)
        if dropped:
            self.dropped += dropped
        return _dumps(rewritten)

    def _build(self) -> bytes:
        if self.client == "responses":
            return self._responses_client_body()
        return self._body()

    def _reset(self) -> None:
        """Forget what building the body noted, before building it again."""
        self._tool_names = tr.ToolNameMap()
        self.dropped = ()
        self.portable_notes = ()
        self._responses = None
        self._spliced = False

    def _body(self) -> bytes:
        req, profile = self.req, self.profile
        if self.upstream == "responses":
            return self._responses_body()
        if self.translating:
            convert = (tr.anthropic_to_openai_request if self.client == "anthropic"
                       else tr.openai_to_anthropic_request)
            translated = convert(req.body, model=self.model, max_tokens_cap=self.max_tokens_cap)
            self._tool_names = translated.tool_names
            self.dropped = translated.dropped + self._strip(translated.body)
            if translated.dropped and log.isEnabledFor(logging.DEBUG):
                log.debug("%s: not translated to %s: %s", profile.name, self.upstream,
                          ", ".join(translated.dropped))
            return _dumps(translated.body)
        base = self._portable_body()
        if profile.strip_params and any(k in req.body for k in profile.strip_params):
            base = dict(req.body if base is None else base)
            self.dropped += self._strip(base)
        changes: dict[str, Any] = {}
        if self.model is not None and self.model != req.model:
            changes["model"] = self.model
        cap = self.max_tokens_cap
        if cap is not None and req.endpoint != "count_tokens":
            for key in ("max_tokens", "max_completion_tokens"):
                value = req.body.get(key)
                if isinstance(value, int) and value > cap:
                    changes[key] = cap
        if self.upstream == "openai" and req.stream and not asked_for_usage(req.body) and \
                "stream_options" not in profile.strip_params:
            # Without it the stream carries no token counts; a client that did not ask does
            # not see them (`claudex.providers.usage_chunks`, applied by the server). A
            # provider that refuses the field: `strip_params = ["stream_options"]`.
            options = req.body.get("stream_options")
            if options is None or isinstance(options, dict):
                changes["stream_options"] = {**(options or {}), "include_usage": True}
        if not changes and base is None:
            return req.raw  # untouched: forward the client's bytes without re-encoding
        if base is None and list(changes) == ["stream_options"] and \
                "stream_options" not in req.body:
            self._spliced = True
            return ask_for_usage(req.raw)  # the client's bytes and one field more
        return _dumps({**(req.body if base is None else base), **changes})

    def _responses_body(self) -> bytes:
        """An Anthropic or Chat request for a Responses provider (`to_responses`)."""
        req, profile = self.req, self.profile
        convert = (tr.to_responses.anthropic_to_responses_request if self.client == "anthropic"
                   else tr.to_responses.chat_to_responses_request)
        translated = convert(req.body, model=self.model, max_tokens_cap=self.max_tokens_cap,
                             chatgpt=self.chatgpt)
        self._tool_names = translated.tool_names
        self.dropped = translated.dropped + self._strip(translated.body)
        if translated.dropped and log.isEnabledFor(logging.DEBUG):
            log.debug("%s: not translated to responses: %s", profile.name,
                      ", ".join(translated.dropped))
        carried = carry_reasoning(translated.body, self._reasoning, profile.name,
                                  model=self.model, chatgpt=self.chatgpt)
        if carried:
            self.portable_notes += (f"kept: {carried} reasoning items of {profile.name}",)
        return _dumps(translated.body)

    @property
    def _reasoning(self) -> ReasoningMemory | None:
        return self.signatures.reasoning if self.signatures is not None else None

    def _strip(self, body: dict[str, Any]) -> tuple[str, ...]:
        """Remove the profile's `strip_params` (Claudex's key: parameters a provider refuses,
        such as `temperature` at the ChatGPT backend) from `body`; returns what went."""
        gone = tuple(key for key in self.profile.strip_params if key in body)
        for key in gone:
            del body[key]
        return gone

    def _portable_body(self) -> dict[str, Any] | None:
        """The conversation made valid for this Anthropic-protocol provider after others
        served some of it (`claudex.providers.thinking`), or None when it can go as it is.
        Lookups are skipped while no other provider signed anything."""
        if self.upstream != "anthropic":
            return None
        name, memory = self.profile.signs_as, self.signatures
        signer = memory.signer if memory is not None and memory.signed_by_others(name) else None
        portable = make_portable(self.req.body, target=name, model=self.model, signer=signer)
        if portable is None:
            return None
        self.portable_notes = portable.notes
        return portable.body if portable.changed(self.req.body) else None

    # -- answers ---------------------------------------------------------------------------------

    def answer(self, payload: bytes) -> bytes:
        """A successful JSON answer in the client's protocol. Raises ValueError when the
        upstream sent something that is not a JSON object."""
        if self.client == "responses" and self.translating:
            return self._responses_client_answer(payload)
        if self.client == "responses" and not self.translating:
            return self._responses_relayed_answer(payload)
        if not self.translating:
            if self.upstream == "anthropic" and self.signatures is not None:
                self.signatures.remember_answer(self.profile.signs_as, payload)
            return payload
        if self.upstream == "responses":
            return self._responses_answer(payload)
        body = fastjson.loads(payload)
        if not isinstance(body, dict):
            raise ValueError("upstream answer is not a JSON object")
        convert = (tr.openai_to_anthropic_response if self.client == "anthropic"
                   else tr.anthropic_to_openai_response)
        return _dumps(convert(body, tool_names=self._tool_names, fallback_model=self.model))

    def _responses_answer(self, payload: bytes) -> bytes:
        # Collected from the stream when the upstream streamed for a client that did not
        # (unless it answered with JSON after all).
        streamed = self.upstream_streams and not payload.lstrip().startswith(b"{")
        body = tr.from_responses.collect_stream(payload) if streamed else fastjson.loads(payload)
        if not isinstance(body, dict):
            raise ValueError("upstream answer is not a JSON object")
        remember_output(self._reasoning, self.profile.name, body.get("output"))
        convert = (tr.from_responses.responses_to_anthropic_response if self.client == "anthropic"
                   else tr.from_responses.responses_to_chat_response)
        return _dumps(convert(body, tool_names=self._tool_names, fallback_model=self.model))

    def error_answer(self, status: int, payload: bytes) -> tuple[int, bytes]:
        if self.wire is not None:  # a cloud's error, in the Anthropic API's shape first
            status, payload = self.wire.error_answer(status, payload)
        if not self.translating:
            return status, payload
        return tr.translate_error(status, payload, source=self.upstream, target=self.client)

    def stream_codec(self) -> StreamCodec:
        codec = self._stream_codec()
        return codec if self.wire is None else self.wire.stream_codec(codec)

    def _stream_codec(self) -> StreamCodec:
        if self.client == "responses":
            return self._responses_client_stream()
        if not self.translating:
            if self.upstream == "openai":
                return Relay(openai.tail_scanner())
            memory = self.signatures
            return Relay(anthropic.tail_scanner(),
                          memory.tap(self.profile.signs_as) if memory is not None else None)
        listener = stream_listener(self._reasoning, self.profile.name)
        if self.upstream == "responses" and self.client == "anthropic":
            return tr.from_responses.ResponsesToAnthropicStream(
                tool_names=self._tool_names, model=self.model, on_item=listener)
        # A Chat client always gets the usage chunk from a translator: the engine counts it,
        # and the server takes it out for a client that did not ask (`usage_chunks`).
        if self.upstream == "responses":
            return tr.from_responses.ResponsesToChatStream(
                tool_names=self._tool_names, model=self.model, include_usage=True,
                on_item=listener)
        if self.client == "anthropic":
            return tr.OpenAIToAnthropicStream(tool_names=self._tool_names, model=self.model)
        return tr.AnthropicToOpenAIStream(
            tool_names=self._tool_names, model=self.model, include_usage=True)

    def sse_error(self, message: str) -> bytes:
        if self.client == "anthropic":
            return anthropic.sse_error(message)
        if self.client == "responses":
            # Continuing the sequence numbers the client has seen: the translating codec's,
            # or as many as the relayed stream had events.
            codec, relayed = self._responses_codec, self._responses_tap
            if codec is not None:
                return codec.fail(message)
            return tr.responses_failed_event(
                message, sequence_number=relayed.events if relayed is not None else 0)
        return openai.sse_error(message)

    # -- a Responses client (Codex CLI, client.responses) ----------------------------------------

    def _responses_client_body(self) -> bytes:
        req = self.req
        if self.upstream == "responses":
            # Same protocol: the client's bytes, re-encoded only when the model, the output
            # cap or the profile's strip_params change something, or when the input holds
            # reasoning another Responses provider produced (this one would refuse it).
            memory, name = self.signatures, self.profile.name
            base = None
            if memory is not None and memory.signed_by_others(name):
                base = tr.without_foreign_reasoning(req.body, name, memory.signer)
                if base is not None:
                    self.dropped += ("reasoning_items",)
            changes: dict[str, Any] = {}
            if self.model is not None and self.model != req.model:
                changes["model"] = self.model
            cap, asked = self.max_tokens_cap, req.body.get("max_output_tokens")
            if cap is not None and isinstance(asked, int) and asked > cap:
                changes["max_output_tokens"] = cap
            if self.chatgpt:
                # That backend stores nothing, and takes only streamed, unstored requests.
                tr.refuse_stateful(req.body)
                if req.body.get("stream") is not True:
                    changes["stream"] = True
                if req.body.get("store") is not False:
                    changes["store"] = False
                changes.update(responses.chatgpt_changes(req.body if base is None else base))
            if not changes and base is None and \
                    not any(k in req.body for k in self.profile.strip_params):
                return req.raw
            body = {**(req.body if base is None else base), **changes}
            self.dropped += self._strip(body)
            return _dumps(body)
        plan = tr.responses_request(req.body, target=self.upstream, model=self.model,
                                    max_tokens_cap=self.max_tokens_cap)
        self._responses = plan
        self.dropped = plan.dropped + self._strip(plan.body)
        if plan.dropped and log.isEnabledFor(logging.DEBUG):
            log.debug("%s: not translated to %s: %s", self.profile.name, self.upstream,
                      ", ".join(plan.dropped))
        return _dumps(plan.body)

    def _responses_plan(self) -> tr.ResponsesRequest:
        if self._responses is None:  # the body is always built first
            raise RuntimeError("the request body was not built")
        return self._responses

    def _responses_client_answer(self, payload: bytes) -> bytes:
        body = fastjson.loads(payload)
        if not isinstance(body, dict):
            raise ValueError("upstream answer is not a JSON object")
        return _dumps(self._responses_plan().answer(body, model=self.model))

    def _responses_relayed_answer(self, payload: bytes) -> bytes:
        """A Responses provider's answer for a Responses client: as it came, or collected from
        the stream the ChatGPT backend sent for a client that asked for JSON. Its encrypted
        reasoning is remembered as this provider's."""
        collected = self.upstream_streams and not self.req.stream
        body = tr.from_responses.collect_stream(payload) if collected else None
        memory = self.signatures
        if memory is not None and (body is not None or b"encrypted_content" in payload):
            for blob in tr.encrypted_in_answer(body if body is not None else
                                               json.loads(payload)):
                memory.remember(self.profile.name, blob)
        return _dumps(body) if body is not None else payload

    def _responses_client_stream(self) -> StreamCodec:
        if self.upstream == "responses":
            memory, name = self.signatures, self.profile.name
            self._responses_tap = tr.ReasoningTap(
                (lambda blob: memory.remember(name, blob)) if memory is not None else None)
            return Relay(responses.tail_scanner(), self._responses_tap)
        self._responses_codec = self._responses_plan().stream(model=self.model)
        return self._responses_codec
