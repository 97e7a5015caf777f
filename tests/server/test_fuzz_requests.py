"""Malformed and fuzzed requests through a real proxy in front of real fake providers (issue 6).

The contract: whatever a client sends, the answer is never a 5xx and never a traceback. A
malformed request gets a 4xx in the client's own protocol format (Anthropic
`{"type":"error","error":{...}}`, OpenAI `{"error":{"message","type","param","code"}}`); a 2xx
is a valid answer. What claudex refuses itself never reaches a provider and never counts
against a breaker.

One proxy and two fakes serve the whole module from a background thread with its own event
loop, so the Hypothesis tests can be plain functions sending with a synchronous client.
Routes cover both client protocols, the default and `/proxy/{profile}` paths, passthrough to a
provider of the same protocol and translation to one of the other; `claude` (Anthropic, backed
up by `gpt`) is the default profile.
"""

from __future__ import annotations

import asyncio
import copy
import json
import os
import socket
import threading
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from claudex.config.model import MAX_BODY_BYTES
from claudex.demo.fake_provider import FakeProvider
from claudex.engine.breaker.circuit import BreakerState
from claudex.engine.engine import Engine
from claudex.providers import translate
from claudex.providers.validation_problems import Problem
from claudex.server import run
from claudex.server.app import create_app
from claudex.server.run import RunningServer
from tests.conftest import (
    TEST_ENV,
    RecordingSleep,
    build_config,
    profile_toml,
    served_models,
)

T = TypeVar("T")
Protocol = Literal["anthropic", "openai"]

# -- the world: a proxy and two fakes on a loop of their own -------------------------------------


@dataclass
class World:
    loop: asyncio.AbstractEventLoop
    engine: Engine
    server: RunningServer
    fakes: dict[str, FakeProvider]
    client: httpx.Client

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout=30)

    def upstream_requests(self) -> int:
        return sum(fake.request_count for fake in self.fakes.values())

    def assert_breakers_untouched(self) -> None:
        """No malformed request may count as a provider failure."""
        for name, rt in self.engine.runtimes.items():
            assert rt.breaker.state is BreakerState.CLOSED, name
            assert rt.breaker.snapshot().consecutive_failures == 0, name
            assert rt.stats.failures == 0, name


@pytest.fixture(scope="module")
def world() -> Iterator[World]:
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, name="fuzz-world", daemon=True)
    thread.start()

    async def start() -> tuple[Engine, RunningServer, dict[str, FakeProvider]]:
        fakes = {"claude": FakeProvider("claude", "anthropic",
                                        models=served_models("claude", "anthropic")),
                 "gpt": FakeProvider("gpt", "openai", models=served_models("gpt", "openai"))}
        for fake in fakes.values():
            await fake.start()
        config = build_config(profile_toml("claude", fakes["claude"], backups=["gpt"])
                              + profile_toml("gpt", fakes["gpt"]))
        engine = Engine(config, sleep=RecordingSleep(), env=TEST_ENV)
        server = await run.start_in_background(create_app(engine))
        return engine, server, fakes

    engine, server, fakes = asyncio.run_coroutine_threadsafe(start(), loop).result(timeout=30)
    client = httpx.Client(base_url=server.url, timeout=20.0)
    built = World(loop, engine, server, fakes, client)
    try:
        yield built
    finally:
        client.close()

        async def stop() -> None:
            await server.stop()
            for fake in fakes.values():
                await fake.stop()

        built.run(stop())
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


# -- routes --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    path: str
    protocol: Protocol
    endpoint: Literal["messages", "count_tokens", "chat"]
    translated: bool

    def __str__(self) -> str:
        return self.path

    @property
    def streams(self) -> bool:
        return self.endpoint != "count_tokens"


ROUTES = (
    Route("/v1/messages", "anthropic", "messages", False),
    Route("/proxy/claude/v1/messages", "anthropic", "messages", False),
    Route("/proxy/gpt/v1/messages", "anthropic", "messages", True),
    Route("/v1/messages/count_tokens", "anthropic", "count_tokens", False),
    Route("/proxy/gpt/v1/messages/count_tokens", "anthropic", "count_tokens", True),
    Route("/v1/chat/completions", "openai", "chat", True),
    Route("/proxy/claude/v1/chat/completions", "openai", "chat", True),
    Route("/proxy/gpt/v1/chat/completions", "openai", "chat", False),
)
ANTHROPIC_ROUTES = tuple(r for r in ROUTES if r.protocol == "anthropic")
OPENAI_ROUTES = tuple(r for r in ROUTES if r.protocol == "openai")

# -- valid bodies rich enough that every field the translators read is present -------------------

WEATHER_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}}
PNG = "iVBORw0KGgoAAAANSUhEUg=="

ANTHROPIC_RICH: dict[str, Any] = {
    "model": "claude-sonnet-4-5",
    "max_tokens": 64,
    "system": [{"type": "text", "text": "Be brief."}],
    "messages": [
        {"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                         "data": PNG}},
            {"type": "document", "source": {"type": "text", "media_type": "text/plain",
                                            "data": "notes"}},
        ]},
        {"role": "assistant", "content": [
            {"type": "text", "text": "calling"},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
             "input": {"city": "Paris"}},
        ]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1",
             "content": [{"type": "text", "text": "sunny"}]},
            {"type": "text", "text": "thanks"},
        ]},
        # A system turn, where Claude Code puts its environment and reminders.
        {"role": "system", "content": [{"type": "text", "text": "Working directory: /tmp",
                                        "cache_control": {"type": "ephemeral"}}]},
    ],
    "tools": [{"name": "get_weather", "description": "Weather", "input_schema": WEATHER_SCHEMA}],
    "tool_choice": {"type": "auto"},
    "metadata": {"user_id": "user-1"},
    "stop_sequences": ["STOP"],
    "temperature": 0.5,
    "top_p": 0.9,
}
COUNT_TOKENS_KEYS = ("model", "system", "messages", "tools", "tool_choice")

OPENAI_RICH: dict[str, Any] = {
    "model": "gpt-4o",
    "max_tokens": 64,
    "messages": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [
            {"type": "text", "text": "look"},
            {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{PNG}"}},
        ]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}},
        ]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "user", "content": "thanks"},
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
                                                "parameters": WEATHER_SCHEMA}}],
    "tool_choice": "auto",
    "parallel_tool_calls": True,
    "stop": ["STOP"],
    "temperature": 0.5,
    "top_p": 0.9,
    "user": "user-1",
}


def rich_body(route: Route, *, stream: bool = False) -> dict[str, Any]:
    if route.protocol == "openai":
        body = copy.deepcopy(OPENAI_RICH)
    else:
        body = copy.deepcopy(ANTHROPIC_RICH)
        if route.endpoint == "count_tokens":
            body = {k: body[k] for k in COUNT_TOKENS_KEYS}
    if stream and route.streams:
        body["stream"] = True
        if route.protocol == "openai":
            body["stream_options"] = {"include_usage": True}
    return body


# -- what every answer must look like -------------------------------------------------------------

_LEAKS = ("Traceback", 'File "', "<class ", " object at 0x", "Error(")


def assert_valid_answer(route: Route, resp: httpx.Response, *, streamed: bool) -> None:
    """Never 5xx; a 4xx is an error in the client's format with a plain message; a 2xx is a
    valid answer for the endpoint."""
    assert resp.status_code < 500, (route, resp.status_code, resp.text[:500])
    for leak in _LEAKS:
        assert leak not in resp.text, (route, resp.text[:500])
    if resp.status_code >= 400:
        assert resp.headers["content-type"].startswith("application/json"), resp.headers
        payload = resp.json()
        if route.protocol == "anthropic":
            assert payload["type"] == "error", payload
            error = payload["error"]
            assert isinstance(error["type"], str) and error["type"], payload
        else:
            error = payload["error"]
            assert isinstance(error["type"], str) and error["type"], payload
            assert "param" in error and "code" in error, payload
        message = error["message"]
        assert isinstance(message, str) and message.strip(), payload
        assert not message.startswith(("{", "[", "(")), payload
        return
    assert resp.status_code == 200, (route, resp.status_code)
    if streamed:
        assert resp.headers["content-type"].startswith("text/event-stream")
        text = resp.text
        if route.protocol == "anthropic":
            assert "event: message_stop" in text and "event: error" not in text, text[-300:]
        else:
            assert text.rstrip().endswith("data: [DONE]") and '"error"' not in text, text[-300:]
        return
    payload = resp.json()
    if route.endpoint == "count_tokens":
        assert isinstance(payload["input_tokens"], int) and payload["input_tokens"] >= 1
    elif route.protocol == "anthropic":
        assert payload["type"] == "message" and isinstance(payload["content"], list), payload
    else:
        assert payload["object"] == "chat.completion" and payload["choices"], payload


def error_message(resp: httpx.Response) -> str:
    message: str = resp.json()["error"]["message"]
    return message


@dataclass
class Sent:
    resp: httpx.Response
    upstream: int  # requests the fakes received for it

    @property
    def local(self) -> bool:
        """Answered by claudex itself: no provider header."""
        return "x-claudex-provider" not in self.resp.headers


def send(world: World, route: Route, *, json_body: Any = None, content: bytes | None = None,
         headers: dict[str, str] | None = None) -> Sent:
    before = world.upstream_requests()
    if content is None:
        content = json.dumps(json_body).encode()
        headers = {"content-type": "application/json", **(headers or {})}
    resp = world.client.post(route.path, content=content, headers=headers)
    return Sent(resp, world.upstream_requests() - before)


def check(world: World, route: Route, body: Any) -> Sent:
    """Send `body`, assert the contract, and that a local refusal touched no provider."""
    sent = send(world, route, json_body=body)
    streamed = isinstance(body, dict) and body.get("stream") is True and route.streams
    assert_valid_answer(route, sent.resp, streamed=streamed and sent.resp.status_code == 200)
    if sent.resp.status_code >= 400 and sent.local:
        assert sent.upstream == 0, (route, body, sent.resp.text)
    world.assert_breakers_untouched()
    return sent


def refused_locally(world: World, route: Route, body: Any, field: str) -> Sent:
    """The request must be refused by claudex with a 400 naming `field`, no provider asked."""
    sent = check(world, route, body)
    assert sent.resp.status_code == 400, (route, field, sent.resp.text)
    assert sent.local and sent.upstream == 0, (route, field, sent.resp.text)
    message = error_message(sent.resp)
    if route.protocol == "anthropic":
        assert message.startswith(f"{field}:") or f"{field}." in message, (field, message)
        assert sent.resp.json()["error"]["type"] == "invalid_request_error"
    else:
        assert f"'{field}" in message, (field, message)
        assert sent.resp.json()["error"]["param"].startswith(field)
        assert sent.resp.json()["error"]["type"] == "invalid_request_error"
    return sent


# -- the baseline: the rich bodies are served everywhere ------------------------------------------


@pytest.mark.parametrize("route", ROUTES, ids=str)
def test_rich_valid_bodies_are_served_on_every_route(world: World, route: Route) -> None:
    for stream in (False, True) if route.streams else (False,):
        sent = check(world, route, rich_body(route, stream=stream))
        assert sent.resp.status_code == 200, sent.resp.text
        expected_upstream = 0 if route.endpoint == "count_tokens" and route.translated else 1
        assert sent.upstream == expected_upstream


# -- bodies that are not JSON objects -------------------------------------------------------------

NOT_OBJECTS: dict[str, tuple[bytes, str]] = {
    "malformed JSON": (b'{"model": "m", "messages": [', "not valid JSON"),
    "trailing garbage": (b'{"model": "m"} extra', "not valid JSON"),
    "single quotes": (b"{'model': 'm'}", "not valid JSON"),
    "list": (b'[{"model": "m"}]', "must be a JSON object"),
    "string": (b'"hello"', "must be a JSON object"),
    "number": (b"42", "must be a JSON object"),
    "null": (b"null", "must be a JSON object"),
    "true": (b"true", "must be a JSON object"),
    "empty": (b"", "empty"),
    "whitespace": (b" \r\n\t", "empty"),
    "invalid UTF-8": (b'{"model": "caf\xe9"}', "UTF-8"),
    "UTF-16": ('{"model": "m"}'.encode("utf-16"), "UTF-8"),
    "NaN": (b'{"model": "m", "temperature": NaN}', "NaN"),
    "Infinity": (b'{"model": "m", "max_tokens": Infinity}', "Infinity"),
    "deep nesting": (b"[" * 50_000 + b"]" * 50_000, "nested too deeply"),
    "4,400-digit integer": (b'{"max_tokens": ' + b"9" * 4400 + b"}", "too many digits"),
}


@pytest.mark.parametrize("case", list(NOT_OBJECTS), ids=str)
def test_bodies_that_are_not_json_objects_get_400(world: World, case: str) -> None:
    raw, words = NOT_OBJECTS[case]
    for route in ROUTES:
        sent = send(world, route, content=raw, headers={"content-type": "application/json"})
        assert_valid_answer(route, sent.resp, streamed=False)
        assert sent.resp.status_code == 400 and sent.upstream == 0, (route, sent.resp.text)
        assert words in error_message(sent.resp), (route, error_message(sent.resp))
    world.assert_breakers_untouched()


# -- wrong types for the fields the proxy and the translators read --------------------------------

Mutation = Callable[[dict[str, Any]], None]


def setter(*path: str | int, value: Any) -> Mutation:
    def mutate(body: dict[str, Any]) -> None:
        target: Any = body
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
    return mutate


def deleter(*path: str | int) -> Mutation:
    def mutate(body: dict[str, Any]) -> None:
        target: Any = body
        for key in path[:-1]:
            target = target[key]
        del target[path[-1]]
    return mutate


# (mutation, field named in the error) — refused by claudex itself on every route.
TOP_LEVEL_CASES: dict[str, tuple[Mutation, str]] = {
    "model int": (setter("model", value=7), "model"),
    "model list": (setter("model", value=["claude"]), "model"),
    "model null": (setter("model", value=None), "model"),
    "model missing": (deleter("model"), "model"),
    "messages missing": (deleter("messages"), "messages"),
    "messages string": (setter("messages", value="hello"), "messages"),
    "messages object": (setter("messages", value={"role": "user"}), "messages"),
    "messages number": (setter("messages", value=3), "messages"),
    "messages empty": (setter("messages", value=[]), "messages"),
    "stream yes": (setter("stream", value="yes"), "stream"),
    "stream 1": (setter("stream", value=1), "stream"),
    "tools string": (setter("tools", value="get_weather"), "tools"),
    "tools object": (setter("tools", value={"name": "x"}), "tools"),
    "tool_choice number": (setter("tool_choice", value=3), "tool_choice"),
    "tool_choice list": (setter("tool_choice", value=["auto"]), "tool_choice"),
    "temperature string": (setter("temperature", value="hot"), "temperature"),
    "top_p bool": (setter("top_p", value=True), "top_p"),
}
ANTHROPIC_TOP_LEVEL_CASES: dict[str, tuple[Mutation, str]] = {
    "system number": (setter("system", value=5), "system"),
    "system object": (setter("system", value={"type": "text", "text": "x"}), "system"),
    "metadata string": (setter("metadata", value="user-1"), "metadata"),
    "metadata list": (setter("metadata", value=[1]), "metadata"),
    "stop_sequences string": (setter("stop_sequences", value="STOP"), "stop_sequences"),
}
MAX_TOKENS_CASES: dict[str, tuple[Mutation, str]] = {
    "max_tokens string": (setter("max_tokens", value="64"), "max_tokens"),
    "max_tokens negative": (setter("max_tokens", value=-1), "max_tokens"),
    "max_tokens zero": (setter("max_tokens", value=0), "max_tokens"),
    "max_tokens float": (setter("max_tokens", value=1.5), "max_tokens"),
    "max_tokens bool": (setter("max_tokens", value=True), "max_tokens"),
    "max_tokens list": (setter("max_tokens", value=[64]), "max_tokens"),
}
OPENAI_TOP_LEVEL_CASES: dict[str, tuple[Mutation, str]] = {
    "stop number": (setter("stop", value=5), "stop"),
    "stream_options string": (setter("stream_options", value="usage"), "stream_options"),
    "user number": (setter("user", value=5), "user"),
    "parallel_tool_calls string": (setter("parallel_tool_calls", value="yes"),
                                   "parallel_tool_calls"),
    "max_completion_tokens string": (setter("max_completion_tokens", value="9"),
                                     "max_completion_tokens"),
}


def _routes_for(case: str) -> tuple[Route, ...]:
    if case in ANTHROPIC_TOP_LEVEL_CASES:
        return ANTHROPIC_ROUTES
    if case in OPENAI_TOP_LEVEL_CASES:
        return OPENAI_ROUTES
    if case in MAX_TOKENS_CASES:  # required by Anthropic's messages, optional elsewhere
        return tuple(r for r in ROUTES if r.endpoint != "count_tokens")
    return ROUTES


ALL_TOP_LEVEL = {**TOP_LEVEL_CASES, **ANTHROPIC_TOP_LEVEL_CASES, **MAX_TOKENS_CASES,
                 **OPENAI_TOP_LEVEL_CASES}


@pytest.mark.parametrize("case", list(ALL_TOP_LEVEL), ids=str)
def test_wrong_top_level_fields_are_refused_before_any_provider(world: World, case: str) -> None:
    mutate, field = ALL_TOP_LEVEL[case]
    for route in _routes_for(case):
        for stream in (False, True) if route.streams and field != "stream" else (False,):
            body = rich_body(route, stream=stream)
            mutate(body)
            refused_locally(world, route, body, field)


def test_anthropic_max_tokens_is_required_and_count_tokens_takes_no_stream(world: World) -> None:
    for route in ANTHROPIC_ROUTES:
        body = rich_body(route)
        if route.endpoint == "messages":
            del body["max_tokens"]
            assert "Field required" in error_message(
                refused_locally(world, route, body, "max_tokens").resp)
        else:
            body["stream"] = True
            assert "Extra inputs are not permitted" in error_message(
                refused_locally(world, route, body, "stream").resp)


def test_a_huge_max_tokens_is_the_providers_to_refuse(world: World) -> None:
    """Only the provider knows its model's output limit: claudex forwards the number (also when
    translating); the provider's 400 states its limit, and claudex asks once more at that cap
    (DESIGN.md failure table), touching no breaker."""
    for route in ROUTES:
        if not route.streams:
            continue
        for stream in (False, True):
            body = rich_body(route, stream=stream)
            body["max_tokens"] = 10**30
            for rt in world.engine.runtimes.values():
                rt.token_limits.clear()  # each case meets the limit for the first time
            sent = check(world, route, body)
            assert sent.resp.status_code == 200 and sent.upstream == 2, (route, sent.resp.text)
            assert ":max_tokens_limit," in sent.resp.headers["x-claudex-attempts"]


def test_error_messages_use_each_apis_own_wording(world: World) -> None:
    anthropic_route, openai_route = ROUTES[0], ROUTES[-1]
    body = rich_body(anthropic_route)
    body["messages"] = "hello"
    assert error_message(refused_locally(world, anthropic_route, body, "messages").resp) == \
        "messages: Input should be a valid list"
    body = rich_body(openai_route)
    body["max_tokens"] = -1
    error = refused_locally(world, openai_route, body, "max_tokens").resp.json()["error"]
    assert error == {
        "message": "Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, "
                   "but got -1 instead.",
        "type": "invalid_request_error", "param": "max_tokens",
        "code": "integer_below_min_value"}


# -- wrong shapes inside messages, blocks, tools: refused when claudex translates ----------------

DEEP_ANTHROPIC: dict[str, tuple[Mutation, str]] = {
    "message not an object": (setter("messages", 0, value="hello"), "messages.0"),
    "role number": (setter("messages", 0, "role", value=1), "messages.0.role"),
    "role unknown": (setter("messages", 0, "role", value="wizard"), "messages.0.role"),
    "role missing": (deleter("messages", 0, "role"), "messages.0.role"),
    "content number": (setter("messages", 0, "content", value=5), "messages.0.content"),
    "content object": (setter("messages", 0, "content", value={"text": "x"}),
                       "messages.0.content"),
    "content missing": (deleter("messages", 0, "content"), "messages.0.content"),
    "block not an object": (setter("messages", 0, "content", 0, value="look"),
                            "messages.0.content.0"),
    "block without type": (deleter("messages", 0, "content", 0, "type"),
                           "messages.0.content.0.type"),
    "block type number": (setter("messages", 0, "content", 0, "type", value=3),
                          "messages.0.content.0.type"),
    "text number": (setter("messages", 0, "content", 0, "text", value=3),
                    "messages.0.content.0.text"),
    "image source string": (setter("messages", 0, "content", 1, "source", value="garbage"),
                            "messages.0.content.1.source"),
    "image source missing": (deleter("messages", 0, "content", 1, "source"),
                             "messages.0.content.1.source"),
    "image data missing": (deleter("messages", 0, "content", 1, "source", "data"),
                           "messages.0.content.1.source.data"),
    "document source list": (setter("messages", 0, "content", 2, "source", value=[1]),
                             "messages.0.content.2.source"),
    "tool_use without id": (deleter("messages", 1, "content", 1, "id"),
                            "messages.1.content.1.id"),
    "tool_use without name": (deleter("messages", 1, "content", 1, "name"),
                              "messages.1.content.1.name"),
    "tool_use input list": (setter("messages", 1, "content", 1, "input", value=[1]),
                            "messages.1.content.1.input"),
    "tool_result without id": (deleter("messages", 2, "content", 0, "tool_use_id"),
                               "messages.2.content.0.tool_use_id"),
    "tool_result content number": (setter("messages", 2, "content", 0, "content", value=1),
                                   "messages.2.content.0.content"),
    "system block string": (setter("system", 0, value="Be brief."), "system.0"),
    "tool not an object": (setter("tools", 0, value="get_weather"), "tools.0"),
    "tool name number": (setter("tools", 0, "name", value=1), "tools.0.name"),
    "tool schema string": (setter("tools", 0, "input_schema", value="{}"),
                           "tools.0.input_schema"),
    "tool_choice tool without name": (setter("tool_choice", value={"type": "tool"}),
                                      "tool_choice.name"),
    "stop sequence number": (setter("stop_sequences", 0, value=1), "stop_sequences.0"),
    "user_id number": (setter("metadata", "user_id", value=1), "metadata.user_id"),
    "system turn content number": (setter("messages", 3, "content", value=1),
                                   "messages.3.content"),
    "system turn block without type": (deleter("messages", 3, "content", 0, "type"),
                                       "messages.3.content.0.type"),
}
DEEP_OPENAI: dict[str, tuple[Mutation, str]] = {
    "message not an object": (setter("messages", 1, value=["hi"]), "messages[1]"),
    "role number": (setter("messages", 1, "role", value=1), "messages[1].role"),
    "role unknown": (setter("messages", 1, "role", value="wizard"), "messages[1].role"),
    "content number": (setter("messages", 1, "content", value=1), "messages[1].content"),
    "user content missing": (deleter("messages", 4, "content"), "messages[4].content"),
    "part not an object": (setter("messages", 1, "content", 0, value=7),
                           "messages[1].content[0]"),
    "part without type": (deleter("messages", 1, "content", 0, "type"),
                          "messages[1].content[0].type"),
    "text part number": (setter("messages", 1, "content", 0, "text", value=7),
                         "messages[1].content[0].text"),
    "image_url number": (setter("messages", 1, "content", 1, "image_url", value=7),
                         "messages[1].content[1].image_url"),
    "image url list": (setter("messages", 1, "content", 1, "image_url", "url", value=[1]),
                       "messages[1].content[1].image_url.url"),
    "file part string": (setter("messages", 1, "content", 1,
                                value={"type": "file", "file": "x"}),
                         "messages[1].content[1].file"),
    "tool_calls string": (setter("messages", 2, "tool_calls", value="call"),
                          "messages[2].tool_calls"),
    "tool_call without id": (deleter("messages", 2, "tool_calls", 0, "id"),
                             "messages[2].tool_calls[0].id"),
    "tool_call function string": (setter("messages", 2, "tool_calls", 0, "function",
                                         value="get_weather"),
                                  "messages[2].tool_calls[0].function"),
    "tool_call arguments object": (setter("messages", 2, "tool_calls", 0, "function",
                                          "arguments", value={"city": "Paris"}),
                                   "messages[2].tool_calls[0].function.arguments"),
    "tool message without id": (deleter("messages", 3, "tool_call_id"),
                                "messages[3].tool_call_id"),
    "tool not an object": (setter("tools", 0, value=1), "tools[0]"),
    "tool function missing": (deleter("tools", 0, "function"), "tools[0].function"),
    "tool parameters string": (setter("tools", 0, "function", "parameters", value="{}"),
                               "tools[0].function.parameters"),
    "stop item number": (setter("stop", 0, value=1), "stop[0]"),
}


def _deep_cases() -> list[tuple[Protocol, str]]:
    return [("anthropic", c) for c in DEEP_ANTHROPIC] + [("openai", c) for c in DEEP_OPENAI]


@pytest.mark.parametrize(("protocol", "case"), _deep_cases(), ids=lambda v: str(v))
def test_wrong_shapes_inside_messages_and_tools(world: World, protocol: Protocol,
                                                case: str) -> None:
    """Translated: claudex refuses them itself, naming the path. Forwarded unchanged: the
    provider judges them, as it would without claudex (here the fakes answer 400 or 200)."""
    mutate, where = (DEEP_ANTHROPIC if protocol == "anthropic" else DEEP_OPENAI)[case]
    for route in ROUTES:
        if route.protocol != protocol:
            continue
        for stream in (False, True) if route.streams else (False,):
            body = rich_body(route, stream=stream)
            try:
                mutate(body)
            except KeyError:
                continue  # the count_tokens body has no such field
            sent = check(world, route, body)
            if route.translated:
                assert sent.resp.status_code == 400 and sent.local and sent.upstream == 0, \
                    (route, sent.resp.text)
                error = sent.resp.json()["error"]
                if protocol == "anthropic":
                    assert error["message"].startswith(f"{where}:"), (where, error)
                else:
                    assert error["param"] == where, (where, error)


def test_a_translation_refusal_is_attributed_and_leaves_the_breaker_alone(world: World) -> None:
    route = next(r for r in ROUTES if r.path == "/proxy/gpt/v1/messages")
    body = rich_body(route)
    body["messages"][0]["content"] = 5
    stats = world.engine.runtimes["gpt"].stats
    sent_upstream = stats.requests
    for _ in range(5):  # more than failure_threshold: a failure count would open the breaker
        sent = check(world, route, body)
        assert sent.resp.status_code == 400 and sent.upstream == 0
        assert sent.resp.headers["x-claudex-attempts"] == "gpt:invalid_request"
    assert stats.requests == sent_upstream


def test_a_translator_bug_fails_over_without_counting_against_the_breaker(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: Any, **kwargs: Any) -> Any:
        raise TypeError("a bug in the translator")

    monkeypatch.setattr(translate, "openai_to_anthropic_request", broken)
    route = next(r for r in ROUTES if r.path == "/proxy/claude/v1/chat/completions")
    for _ in range(4):
        sent = send(world, route, json_body=rich_body(route))
        # claude cannot be reached through the translator; its backup (gpt) serves.
        assert sent.resp.status_code == 200, sent.resp.text
        assert sent.resp.headers["x-claudex-provider"] == "gpt"
        assert sent.resp.headers["x-claudex-attempts"] == "claude:translation_error,gpt:200"
    world.assert_breakers_untouched()


# -- huge bodies, lying lengths, odd content types ------------------------------------------------

OVERSIZED = b'{"model": "m", "x": "' + b"a" * MAX_BODY_BYTES + b'"}'


@pytest.mark.parametrize("route", [ROUTES[0], ROUTES[-1]], ids=str)
def test_bodies_over_the_limit_get_413_with_or_without_a_length(world: World,
                                                                route: Route) -> None:
    declared = send(world, route, content=OVERSIZED)

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(OVERSIZED), 1 << 20):
            yield OVERSIZED[start:start + (1 << 20)]

    before = world.upstream_requests()
    chunked = world.client.post(route.path, content=chunks())  # transfer-encoding: chunked
    assert "content-length" not in chunked.request.headers
    for resp in (declared.resp, chunked):
        assert resp.status_code == 413, resp.text[:300]
        assert_valid_answer(route, resp, streamed=False)
        assert "32 MB" in error_message(resp)
    assert declared.upstream == 0 and world.upstream_requests() == before


def raw_exchange(world: World, request: bytes, *, give_up: bool = False) -> bytes:
    """Send bytes on a fresh connection and read until the server closes it. `give_up`: then
    close our sending side at once, like a client that stops in the middle of its body (the
    server takes that as the client going away, even with a whole request sent)."""
    with socket.create_connection(("127.0.0.1", world.server.port), timeout=10) as sock:
        sock.sendall(request)
        if give_up:
            sock.shutdown(socket.SHUT_WR)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
    return received


def head(path: str, length: bytes) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n"
            "Content-Type: application/json\r\n").encode() + b"Content-Length: " + length + \
        b"\r\n\r\n"


def status_of(response: bytes) -> int | None:
    return int(response.split(b" ", 2)[1]) if response.startswith(b"HTTP/1.1 ") else None


def test_a_declared_length_over_the_limit_is_refused_before_reading(world: World) -> None:
    body = json.dumps(rich_body(ROUTES[0])).encode()
    before = world.upstream_requests()
    response = raw_exchange(world, head("/v1/messages", str(MAX_BODY_BYTES + 1).encode()) + body)
    assert status_of(response) == 413
    payload = json.loads(response.split(b"\r\n\r\n", 1)[1])
    assert payload["error"]["type"] == "request_too_large"
    assert world.upstream_requests() == before


@pytest.mark.parametrize("route", [ROUTES[0], ROUTES[-1]], ids=str)
def test_a_lying_content_length_never_reaches_a_provider(world: World, route: Route) -> None:
    body = json.dumps(rich_body(route)).encode()
    before = world.upstream_requests()
    # Claims more than it sends, then stops: the request never completes, nothing answers it.
    short = raw_exchange(world, head(route.path, str(len(body) + 500).encode()) + body,
                         give_up=True)
    assert short == b"", short[:300]
    # Claims less than it sends: the body is cut (not JSON), and the rest is no request.
    long = raw_exchange(world, head(route.path, str(len(body) - 20).encode()) + body)
    assert status_of(long) == 400, long[:300]
    answer = httpx.Response(400, headers={"content-type": "application/json"},
                            content=long.split(b"\r\n\r\n", 1)[1])
    assert_valid_answer(route, answer, streamed=False)
    assert "not valid JSON" in error_message(answer)
    # A length that is no number is a framing error: the HTTP server refuses it (in plain
    # text) before any route, and so any protocol, is known.
    for bad in (b"abc", b"-5", b"99999999999999999999999"):
        response = raw_exchange(world, head(route.path, bad) + body)
        assert status_of(response) == 400, response[:300]
    assert world.upstream_requests() == before
    world.assert_breakers_untouched()


CONTENT_TYPES: dict[str, tuple[dict[str, str], Callable[[dict[str, Any]], bytes], int]] = {
    # Real SDKs always send application/json; a JSON body under another type is still served.
    "text/plain": ({"content-type": "text/plain"}, lambda b: json.dumps(b).encode(), 200),
    "missing": ({}, lambda b: json.dumps(b).encode(), 200),
    "charset=latin-1, ASCII body": ({"content-type": "application/json; charset=latin-1"},
                                    lambda b: json.dumps(b).encode(), 200),
    "charset=latin-1, latin-1 bytes": (
        {"content-type": "application/json; charset=latin-1"},
        lambda b: json.dumps({**b, "model": "caf\xe9"}, ensure_ascii=False).encode("latin-1"),
        400),
    "form": ({"content-type": "application/x-www-form-urlencoded"},
             lambda b: b"model=claude&max_tokens=64", 400),
    "multipart": ({"content-type": "multipart/form-data; boundary=XyZ"},
                  lambda b: (b'--XyZ\r\nContent-Disposition: form-data; name="body"\r\n\r\n'
                             + json.dumps(b).encode() + b"\r\n--XyZ--\r\n"), 400),
}


@pytest.mark.parametrize("case", list(CONTENT_TYPES), ids=str)
def test_odd_content_types(world: World, case: str) -> None:
    headers, encode, status = CONTENT_TYPES[case]
    for route in ROUTES:
        sent = send(world, route, content=encode(rich_body(route)), headers=headers)
        assert sent.resp.status_code == status, (route, sent.resp.text)
        assert_valid_answer(route, sent.resp, streamed=False)
        if status >= 400:
            assert sent.upstream == 0
    world.assert_breakers_untouched()


def test_lone_surrogates_are_escaped_when_translated_and_judged_upstream(world: World) -> None:
    """`"\\ud800"` parses in Python but has no UTF-8 form: translation must not crash on it."""
    for route in ROUTES:
        raw = json.dumps(rich_body(route)).replace('"thanks"', '"thanks \\ud800"').encode()
        sent = send(world, route, content=raw)
        assert_valid_answer(route, sent.resp, streamed=False)
        raw = json.dumps(rich_body(route)).replace('"model": "', '"model": "\\udc00').encode()
        sent = send(world, route, content=raw)
        assert_valid_answer(route, sent.resp, streamed=False)
    world.assert_breakers_untouched()


# -- Hypothesis: arbitrary garbage anywhere ------------------------------------------------------

# CLAUDEX_FUZZ_EXAMPLES=5000 searches deeper, with fresh randomness, on a developer's machine;
# by default the search is small and the same on every run.
_DEEP_SEARCH = os.environ.get("CLAUDEX_FUZZ_EXAMPLES")
FUZZ = settings(max_examples=int(_DEEP_SEARCH or 120), derandomize=_DEEP_SEARCH is None,
                deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

SCALARS = (st.none() | st.booleans() | st.integers(-(2**70), 2**70)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=8)
           | st.sampled_from(["user", "assistant", "system", "tool", "text", "image",
                              "tool_use", "tool_result", "function", "image_url", "auto",
                              "any", "none", "base64", "url", ""]))
GARBAGE = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=3)
                       | st.dictionaries(st.text(max_size=6) | st.sampled_from(
                           ["type", "text", "role", "content", "source", "id", "name"]),
                           inner, max_size=3), max_leaves=6)
DELETE = object()


def paths_of(value: Any, prefix: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    if isinstance(value, dict):
        for key, inner in value.items():
            yield (*prefix, key)
            yield from paths_of(inner, (*prefix, key))
    elif isinstance(value, list):
        for index, inner in enumerate(value):
            yield (*prefix, index)
            yield from paths_of(inner, (*prefix, index))


def mutated(body: dict[str, Any], path: tuple[str | int, ...], value: Any) -> dict[str, Any]:
    body = copy.deepcopy(body)
    target: Any = body
    for key in path[:-1]:
        target = target[key]
    if value is DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return body


@st.composite
def fuzzed_requests(draw: st.DrawFn) -> tuple[Route, dict[str, Any], bool]:
    route = draw(st.sampled_from(ROUTES))
    stream = route.streams and draw(st.booleans())
    body = rich_body(route, stream=stream)
    for _ in range(draw(st.integers(1, 2))):
        path = draw(st.sampled_from(list(paths_of(body))))
        body = mutated(body, path, draw(GARBAGE | st.just(DELETE)))
    return route, body, stream


@FUZZ
@given(fuzzed_requests())
def test_garbage_anywhere_in_a_valid_body_never_breaks_the_proxy(
    world: World, request_case: tuple[Route, dict[str, Any], bool]
) -> None:
    route, body, _ = request_case
    check(world, route, body)


# The test's own statement of the top-level contract: a value outside these kinds is refused
# by claudex itself, on every route.
def _int_at_least_1(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v >= 1


def _non_empty_list(v: Any) -> bool:
    return isinstance(v, list) and bool(v)


def _number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


TOP_LEVEL_CONTRACT: dict[Protocol, dict[str, Callable[[Any], bool]]] = {
    "anthropic": {
        "model": lambda v: isinstance(v, str), "messages": _non_empty_list,
        "max_tokens": _int_at_least_1, "stream": lambda v: v is None or isinstance(v, bool),
        "system": lambda v: v is None or isinstance(v, str | list),
        "temperature": lambda v: v is None or _number(v),
        "metadata": lambda v: v is None or isinstance(v, dict),
        "tools": lambda v: v is None or isinstance(v, list),
        "tool_choice": lambda v: v is None or isinstance(v, dict | str),
        "stop_sequences": lambda v: v is None or isinstance(v, list),
    },
    "openai": {
        "model": lambda v: isinstance(v, str), "messages": _non_empty_list,
        "max_tokens": lambda v: v is None or _int_at_least_1(v),
        "max_completion_tokens": lambda v: v is None or _int_at_least_1(v),
        "stream": lambda v: v is None or isinstance(v, bool),
        "temperature": lambda v: v is None or _number(v),
        "tools": lambda v: v is None or isinstance(v, list),
        "tool_choice": lambda v: v is None or isinstance(v, dict | str),
        "stop": lambda v: v is None or isinstance(v, str | list),
        "user": lambda v: v is None or isinstance(v, str),
    },
}


@st.composite
def wrong_top_level_values(draw: st.DrawFn) -> tuple[Route, str, dict[str, Any]]:
    route = draw(st.sampled_from([r for r in ROUTES if r.endpoint != "count_tokens"]))
    contract = TOP_LEVEL_CONTRACT[route.protocol]
    field = draw(st.sampled_from(sorted(contract)))
    value = draw(GARBAGE.filter(lambda v: not contract[field](v)))
    body = rich_body(route)
    if value is None:
        body.pop(field, None)
    else:
        body[field] = value
    return route, field, body


@FUZZ
@given(wrong_top_level_values())
def test_any_wrong_top_level_value_is_refused_by_claudex(
    world: World, request_case: tuple[Route, str, dict[str, Any]]
) -> None:
    route, field, body = request_case
    refused_locally(world, route, body, field)


@settings(FUZZ, max_examples=80)
@given(st.sampled_from(ROUTES), st.binary(max_size=64) | GARBAGE.map(
    lambda v: json.dumps(v).encode()))
def test_arbitrary_bytes_and_json_values_get_a_protocol_error(
    world: World, route: Route, raw: bytes
) -> None:
    sent = send(world, route, content=raw, headers={"content-type": "application/json"})
    assert_valid_answer(route, sent.resp, streamed=False)
    assert sent.resp.status_code == 400 and sent.upstream == 0, sent.resp.text


# -- the wording of problems, without a server ----------------------------------------------------


def test_problem_wording_in_both_protocols() -> None:
    problem = Problem(("messages", 0, "content", 1, "type"), "missing")
    assert problem.anthropic_message() == "messages.0.content.1.type: Field required"
    assert problem.openai_message() == "Missing required parameter: 'messages[0].content[1].type'."
    assert problem.openai_param == "messages[0].content[1].type"
    wrong = Problem(("stream",), "type", "boolean", "yes")
    assert wrong.anthropic_message() == "stream: Input should be a valid boolean"
    assert wrong.openai_message() == \
        "Invalid type for 'stream': expected a boolean, but got a string instead."
    role = Problem(("messages", 2, "role"), "value", got="wizard", allowed=("user", "assistant"))
    assert role.anthropic_message() == "messages.2.role: Input should be 'user' or 'assistant'"
    assert role.openai_code == "invalid_value"
