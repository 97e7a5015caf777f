"""Request bodies: parsed once with orjson, forwarded as the client's bytes when nothing changes,
re-encoded only when something did, and what orjson reads differently from the standard library
(integers beyond 64 bits, escaped lone surrogates, numbers beyond a double, NaN) decided and
checked through a real proxy on 127.0.0.1 against an upstream that records the bytes it got."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from claudex.providers import fastjson
from tests.conftest import build_config

ANSWER = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m",
          "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn",
          "stop_sequence": None, "usage": {"input_tokens": 3, "output_tokens": 1}}
CHAT_ANSWER = {"id": "c", "object": "chat.completion", "created": 1, "model": "m",
               "choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"},
                            "finish_reason": "stop"}],
               "usage": {"prompt_tokens": 3, "completion_tokens": 1, "total_tokens": 4}}


class Recorder:
    """An upstream that keeps every body exactly as it arrived."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        self.url = ""

    async def messages(self, request: web.Request) -> web.Response:
        self.bodies.append(await request.read())
        return web.json_response(ANSWER)

    async def chat(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        self.bodies.append(raw)
        if json.loads(raw).get("stream") is not True:
            return web.json_response(CHAT_ANSWER)
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        await response.write(
            b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
            b'"choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},'
            b'"finish_reason":null}],"usage":null}\n\n'
            b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
            b'"choices":[{"index":0,"delta":{},"finish_reason":"stop"}],"usage":null}\n\n'
            b'data: {"id":"c","object":"chat.completion.chunk","created":1,"model":"m",'
            b'"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":1,'
            b'"total_tokens":4}}\n\ndata: [DONE]\n\n')
        await response.write_eof()
        return response


@pytest.fixture
async def recorder() -> AsyncIterator[Recorder]:
    rec = Recorder()
    app = web.Application(client_max_size=8 * 1024 * 1024)
    app.router.add_post("/v1/messages", rec.messages)
    app.router.add_post("/v1/chat/completions", rec.chat)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    rec.url = f"http://127.0.0.1:{port}"
    yield rec
    await runner.cleanup()


def _config(rec: Recorder) -> str:
    # "same": nothing to change; "mapped": the model is mapped, so the body is re-encoded;
    # "oai": an OpenAI-compatible profile.
    return f"""
[[profiles]]
name = "same"
provider_type = "DirectAnthropic"
base_url = "{rec.url}"
api_key_env = "FAKE_KEY"

[[profiles]]
name = "mapped"
provider_type = "DirectAnthropic"
base_url = "{rec.url}"
api_key_env = "FAKE_KEY"
models = {{ "claude-sonnet-4-5" = "mapped-model" }}

[[profiles]]
name = "oai"
provider_type = "OpenAICompatible"
base_url = "{rec.url}/v1"
api_key_env = "FAKE_KEY"

[[profiles]]
name = "oai-plain"
provider_type = "OpenAICompatible"
base_url = "{rec.url}/v1"
api_key_env = "FAKE_KEY"
strip_params = ["stream_options"]
"""


@pytest.fixture
async def proxy(recorder: Recorder, proxy_factory: Any) -> Any:
    return await proxy_factory(build_config(_config(recorder)))


# Odd but valid formatting, key order, escapes and non-ASCII text: all of it must survive.
RAW = ('{ "max_tokens" : 64,\n "model":"claude-sonnet-4-5", "messages": [ {"role":"user",'
       '"content":"caf\\u00e9 — naïve \\"quoted\\" \\n line"}],'
       ' "metadata": {"user_id": "u"}, "temperature": 0.5 }').encode()


async def _post(proxy: Any, profile: str, raw: bytes, path: str = "v1/messages") -> Any:
    return await proxy.client.post(f"/proxy/{profile}/{path}", content=raw,
                                   headers={"content-type": "application/json"})


async def test_an_untouched_body_is_forwarded_byte_for_byte(proxy: Any, recorder: Recorder,
                                                            ) -> None:
    response = await _post(proxy, "same", RAW)
    assert response.status_code == 200
    assert recorder.bodies == [RAW]


async def test_a_changed_body_is_reencoded_with_every_other_value_kept(
        proxy: Any, recorder: Recorder) -> None:
    response = await _post(proxy, "mapped", RAW)
    assert response.status_code == 200
    sent = recorder.bodies[0]
    assert json.loads(sent) == {**json.loads(RAW), "model": "mapped-model"}
    assert "café — naïve".encode() in sent  # UTF-8 as the APIs send it, not \u escapes
    assert b": " not in sent  # compact


BIG = 2**70


@pytest.mark.parametrize("where", ["top", "nested"])
async def test_an_integer_beyond_64_bits_is_kept_exactly(proxy: Any, recorder: Recorder,
                                                         where: str) -> None:
    """orjson would read 2**70 as a float and lose digits; the client's value reaches the
    provider as written, forwarded or re-encoded, and claudex never answers 500 for it."""
    body: dict[str, Any] = {"model": "claude-sonnet-4-5", "max_tokens": 64,
                            "messages": [{"role": "user", "content": "hi"}]}
    if where == "top":
        body["top_k"] = BIG
    else:
        body["metadata"] = {"user_id": "u", "n": [BIG, -BIG]}
    raw = json.dumps(body).encode()
    for profile in ("same", "mapped"):
        response = await _post(proxy, profile, raw)
        assert response.status_code == 200, response.text
    forwarded, reencoded = recorder.bodies
    assert forwarded == raw
    exact = json.loads(reencoded)
    assert exact == {**body, "model": "mapped-model"}
    assert str(BIG).encode() in reencoded


async def test_a_huge_max_tokens_is_judged_like_any_integer(proxy: Any, recorder: Recorder,
                                                            ) -> None:
    raw = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": BIG,
                      "messages": [{"role": "user", "content": "hi"}]}).encode()
    response = await _post(proxy, "same", raw)
    assert response.status_code == 200  # a valid integer to claudex: the provider judges it
    assert recorder.bodies == [raw]


async def test_an_escaped_lone_surrogate_is_valid_json_and_goes_escaped(
        proxy: Any, recorder: Recorder) -> None:
    raw = (b'{"model":"claude-sonnet-4-5","max_tokens":64,'
           b'"messages":[{"role":"user","content":"half \\ud800 pair"}]}')
    for profile in ("same", "mapped"):
        response = await _post(proxy, profile, raw)
        assert response.status_code == 200, response.text
    forwarded, reencoded = recorder.bodies
    assert forwarded == raw
    assert b"half \\ud800 pair" in reencoded
    assert json.loads(reencoded)["messages"][0]["content"] == "half \ud800 pair"


@pytest.mark.parametrize(("raw", "words"), [
    (b'{"model":"m","max_tokens":NaN,"messages":[]}', "NaN is not a JSON value"),
    (b'{"model":"m","max_tokens":64,"temperature":-Infinity,"messages":[]}',
     "-Infinity is not a JSON value"),
    (b'{"model":"m","max_tokens":64,"temperature":1e400,"messages":[]}',
     "number out of range (1e400)"),
    (b'{"model":"m","max_tokens":64,', "not valid JSON"),
    (b'{"model":"m"} trailing', "not valid JSON"),
    (b'{"model":"\xff"}', "not valid UTF-8 (byte 10)"),
    (b"[1, 2]", "must be a JSON object"),
    (b"  ", "empty"),
    (b"[" * 5000 + b"]" * 5000, "nested too deeply"),
])
@pytest.mark.parametrize("client", ["anthropic", "openai", "responses"])
async def test_unreadable_bodies_are_a_400_in_the_clients_format(
        proxy: Any, recorder: Recorder, raw: bytes, words: str, client: str) -> None:
    path, profile = {"anthropic": ("v1/messages", "same"),
                     "openai": ("v1/chat/completions", "oai"),
                     "responses": ("v1/responses", "oai")}[client]
    response = await _post(proxy, profile, raw, path)
    assert response.status_code == 400
    body = response.json()
    if client == "anthropic":
        assert body["type"] == "error"
        assert body["error"]["type"] == "invalid_request_error"
        assert words in body["error"]["message"]
    else:
        assert words in body["error"]["message"]
    assert recorder.bodies == []  # no provider asked


async def test_a_claude_code_sized_body_forwards_untouched(proxy: Any, recorder: Recorder,
                                                           ) -> None:
    blocks = [{"type": "text", "text": f"line {i} → naïve {'x' * 200}\n"} for i in range(3000)]
    raw = json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 64, "system": "s" * 20_000,
                      "messages": [{"role": "user", "content": blocks}]},
                     ensure_ascii=False).encode()
    assert len(raw) > 700_000
    response = await _post(proxy, "same", raw)
    assert response.status_code == 200
    assert recorder.bodies == [raw]


# -- the helpers themselves ------------------------------------------------------------------


def test_lossy_finds_only_floats_that_may_have_been_big_integers() -> None:
    assert fastjson.lossy(fastjson.loads(b'{"a":[1,{"b":1180591620717411303424}]}'))
    assert fastjson.lossy({"a": -1e19})
    assert fastjson.lossy({"a": 1e300})  # may have been: read again exactly, which is harmless
    for fine in ({"a": 1.5, "b": [0.2, 18446744073709551615]}, {"t": float("inf")}, [],
                 "text", {"a": {"b": [True, None, 3, 1e18]}}):
        assert not fastjson.lossy(fine)


def test_dumps_falls_back_for_what_orjson_cannot_write() -> None:
    assert fastjson.dumps({"a": "é", "b": [1, 2]}) == '{"a":"é","b":[1,2]}'.encode()
    assert json.loads(fastjson.dumps({"a": BIG})) == {"a": BIG}
    assert fastjson.dumps({"a": "\ud800"}) == b'{"a":"\\ud800"}'
    assert fastjson.loads(b'{"a":"\\udc00"}') == {"a": "\udc00"}
    with pytest.raises(json.JSONDecodeError):
        fastjson.loads(b"{")


async def test_a_chat_stream_goes_as_the_clients_bytes_with_usage_asked_for(
        proxy: Any, recorder: Recorder) -> None:
    """claudex asks an OpenAI-compatible upstream for the stream's usage by writing one member
    into the client's bytes, not by re-encoding them: spacing, order and a 2**70 stay exact."""
    raw = (b'{ "model": "gpt-4o", "stream": true, "n": ' + str(BIG).encode()
           + b',\n "messages": [{"role": "user", "content": "caf\\u00e9"}] }')
    response = await _post(proxy, "oai", raw, "v1/chat/completions")
    assert response.status_code == 200
    assert b'"usage"' not in response.content  # the client did not ask
    assert recorder.bodies == [b'{"stream_options":{"include_usage":true},' + raw[1:]]
    counted = next(p for p in (await proxy.client.get("/_claudex/status")).json()["profiles"]
                   if p["name"] == "oai")["tokens"]
    assert counted["input_tokens"] == 3 and counted["output_tokens"] == 1


async def test_a_provider_that_refuses_stream_options_is_not_sent_them(
        proxy: Any, recorder: Recorder) -> None:
    raw = b'{"model":"gpt-4o","stream":true,"messages":[{"role":"user","content":"hi"}]}'
    response = await _post(proxy, "oai-plain", raw, "v1/chat/completions")
    assert response.status_code == 200
    assert recorder.bodies == [raw]
