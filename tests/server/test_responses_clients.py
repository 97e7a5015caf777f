"""Responses API clients (the openai SDK's `client.responses`) through a real proxy on
127.0.0.1 to Anthropic and Chat Completions fakes: text, streams, a tool call and its result,
failover, and the 400s claudex gives for what it cannot serve."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import openai
import pytest

from claudex.demo.fake_responses import ChatGPTRules
from claudex.demo.scripted import script_prompt
from soak.protocol_check_responses import validate_responses
from tests.conftest import build_config, profile_toml
from tests.engine.credentials.test_proxy_codex_auth import ACCOUNT, codex_profile, write_auth_json

BASH_TOOL = {"type": "function", "name": "Bash", "description": "Run a shell command.",
             "strict": False,
             "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                            "required": ["command"]}}


def _client(url: str, profile: str | None = None) -> openai.AsyncOpenAI:
    base = f"{url}/proxy/{profile}/v1" if profile else f"{url}/v1"
    return openai.AsyncOpenAI(base_url=base, api_key="unused", max_retries=0)


@pytest.mark.parametrize("protocol", ["anthropic", "openai"])
async def test_text_answer_and_stream(protocol: str, fakes: Any, proxy_factory: Any) -> None:
    f = await fakes(("up", protocol))
    proxy = await proxy_factory(build_config(profile_toml("up", f["up"])), fakes=f)
    client = _client(proxy.url)
    response = await client.responses.create(
        model="gpt-5", instructions="Be brief.", store=False,
        input=[{"role": "developer", "content": "Answer in English."},
               {"role": "user", "content": [{"type": "input_text", "text": "hello"}]}])
    assert response.status == "completed"
    assert "up" in response.output_text
    assert response.usage is not None and response.usage.output_tokens > 0
    sent = f["up"].requests[-1].json
    system = sent["system"] if protocol == "anthropic" else sent["messages"][0]["content"]
    assert "Be brief." in json.dumps(system)

    async with client.responses.stream(model="gpt-5", input="events:5") as stream:
        deltas = [e.delta async for e in stream if e.type == "response.output_text.delta"]
        final = await stream.get_final_response()
    assert len(deltas) >= 2
    assert final.output_text == "".join(deltas)
    assert "up" in final.output_text and final.status == "completed"
    assert final.usage is not None and final.usage.input_tokens > 0
    await client.close()


@pytest.mark.parametrize("protocol", ["anthropic", "openai"])
@pytest.mark.parametrize("stream", [False, True])
async def test_tool_call_and_its_result(protocol: str, stream: bool, fakes: Any,
                                        proxy_factory: Any) -> None:
    f = await fakes(("up", protocol))
    proxy = await proxy_factory(build_config(profile_toml("up", f["up"])), fakes=f)
    client = _client(proxy.url)
    prompt = script_prompt("tok1", [("Bash", "echo hi")])
    conversation: list[Any] = [{"role": "user", "content": prompt}]

    async def turn() -> Any:
        if not stream:
            return await client.responses.create(model="gpt-5", input=conversation,
                                                 tools=[BASH_TOOL], store=False)
        async with client.responses.stream(model="gpt-5", input=conversation,
                                           tools=[BASH_TOOL], store=False) as events:
            kinds = [e.type async for e in events]
            assert kinds[:2] == ["response.created", "response.in_progress"]
            assert kinds[-1] == "response.completed"
            return await events.get_final_response()

    first = await turn()
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "Bash"
    assert json.loads(calls[0].arguments)["command"] == "echo hi"
    conversation += [calls[0].model_dump(exclude_none=True),
                     {"type": "function_call_output", "call_id": calls[0].call_id,
                      "output": "hi"}]
    second = await turn()
    assert second.output_text == "done tok1"
    # The result reached the upstream as that protocol's tool result, under the same call id.
    sent = json.dumps(f["up"].requests[-1].json)
    assert calls[0].call_id in sent and '"hi"' in sent
    await client.close()


async def test_namespace_flattened_and_hosted_tools_left_out(fakes: Any,
                                                              proxy_factory: Any) -> None:
    f = await fakes(("up", "openai"))
    proxy = await proxy_factory(build_config(profile_toml("up", f["up"])), fakes=f)
    namespace = {"type": "namespace", "name": "shell", "description": "Shell tools.",
                 "tools": [{"type": "function", "name": "run", "description": "Run.",
                            "parameters": BASH_TOOL["parameters"]}]}
    answer = await proxy.client.post("/v1/responses", json={
        "model": "gpt-5", "input": "hello", "tools": [BASH_TOOL, namespace,
                                                      {"type": "web_search"}]})
    assert answer.status_code == 200
    sent = f["up"].requests[-1].json
    assert [t["function"]["name"] for t in sent["tools"]] == ["Bash", "shell__run"]
    assert answer.json()["tools"][2] == {"type": "web_search"}  # echoed as the client sent it


async def test_failover_from_a_failing_primary(fakes: Any, proxy_factory: Any) -> None:
    f = await fakes(("claude", "anthropic"), ("chat", "openai"))
    config = build_config(profile_toml("claude", f["claude"], backups=["chat"])
                          + profile_toml("chat", f["chat"]))
    proxy = await proxy_factory(config, fakes=f)
    f["claude"].set_fault("529")
    client = _client(proxy.url, "claude")
    async with client.responses.stream(model="gpt-5", input="events:3") as stream:
        final = await stream.get_final_response()
    assert "chat" in final.output_text
    raw = await proxy.client.post("/proxy/claude/v1/responses",
                                  json={"model": "gpt-5", "input": "hello"})
    assert raw.status_code == 200
    assert raw.headers["x-claudex-attempts"].startswith("claude:")
    assert raw.headers["x-claudex-provider"] == "chat"
    await client.close()


async def test_all_failed_is_an_openai_error(fakes: Any, proxy_factory: Any) -> None:
    f = await fakes(("up", "anthropic"))
    proxy = await proxy_factory(build_config(profile_toml("up", f["up"])), fakes=f)
    f["up"].set_fault("500")
    client = _client(proxy.url)
    with pytest.raises(openai.APIStatusError) as caught:
        await client.responses.create(model="gpt-5", input="hello")
    assert caught.value.status_code == 502
    assert "up" in caught.value.message
    await client.close()


async def test_previous_response_id_and_bad_input_refused(fakes: Any,
                                                          proxy_factory: Any) -> None:
    f = await fakes(("up", "openai"))
    proxy = await proxy_factory(build_config(profile_toml("up", f["up"])), fakes=f)
    before = len(f["up"].requests)
    stateful = await proxy.client.post("/v1/responses", json={
        "model": "gpt-5", "input": "more", "previous_response_id": "resp_123"})
    assert stateful.status_code == 400
    error = stateful.json()["error"]
    assert error["param"] == "previous_response_id"
    assert "no conversation history" in error["message"]
    bad = await proxy.client.post("/v1/responses", json={"model": "gpt-5", "input": 5})
    assert bad.status_code == 400
    assert bad.json()["error"]["param"] == "input"
    item = await proxy.client.post("/v1/responses", json={
        "model": "gpt-5", "input": [{"type": "function_call_output", "output": "x"}]})
    assert item.status_code == 400
    assert item.json()["error"]["param"] == "input[0].call_id"
    assert len(f["up"].requests) == before  # nothing was sent


@pytest.mark.parametrize("protocol", ["anthropic", "openai", "responses"])
@pytest.mark.parametrize("fault", ["cut", "stream_error"])
async def test_a_stream_broken_after_commit_ends_in_response_failed(
        protocol: str, fault: str, fakes: Any, proxy_factory: Any) -> None:
    f = await fakes(("up", protocol))
    proxy = await proxy_factory(build_config(profile_toml("up", f["up"])), fakes=f)
    f["up"].set_fault(fault, cut_after_events=2)
    answer = await proxy.client.post("/v1/responses", json={
        "model": "gpt-4o", "input": "events:6", "stream": True})
    assert answer.status_code == 200
    relayed_error = protocol == "responses" and fault == "stream_error"
    if not relayed_error:  # that one is the upstream's own event, passed on as it came
        # The soak's oracle: sequence numbers run on into one response.failed, last.
        summary = validate_responses(answer.content)
        assert summary.error is not None and summary.error["message"]
    client = _client(proxy.url)
    async with client.responses.stream(model="gpt-4o", input="events:6") as stream:
        kinds = [event.type async for event in stream]
    assert kinds[-1] in (("error", "response.failed") if relayed_error else ("response.failed",))
    assert "response.completed" not in kinds
    await client.close()


async def test_responses_client_at_the_chatgpt_backend(fakes: Any, proxy_factory: Any,
                                                       tmp_path: Path) -> None:
    """Same protocol, but that backend's rules: claudex makes the request streamed and
    unstored, collects the stream for a client that asked for JSON, and refuses stored
    history, which that backend does not keep."""
    f = await fakes(("backend", "responses"),)
    backend = f["backend"]
    backend.chatgpt = ChatGPTRules(account_id=ACCOUNT)
    backend.strict_models = False
    auth_json = tmp_path / "auth.json"
    write_auth_json(auth_json, "tok-1")
    proxy = await proxy_factory(build_config(codex_profile(backend, auth_json,
                                                           "http://127.0.0.1:9/token")),
                                fakes=f)
    client = _client(proxy.url, "codex")
    response = await client.responses.create(model="gpt-5-codex", input="hello")
    assert "backend" in response.output_text and response.status == "completed"
    sent = backend.requests[-1].json
    assert sent["stream"] is True and sent["store"] is False
    # What that backend refuses otherwise: no `instructions`, an `input` that is no list.
    assert sent["instructions"] == ""
    assert sent["input"] == [{"type": "message", "role": "user",
                              "content": [{"type": "input_text", "text": "hello"}]}]
    before = len(backend.requests)
    with pytest.raises(openai.BadRequestError) as caught:
        await client.responses.create(model="gpt-5-codex", input="more",
                                      previous_response_id="resp_1")
    assert "previous_response_id" in caught.value.message
    assert len(backend.requests) == before
    await client.close()


@pytest.mark.parametrize("stream", [False, True])
async def test_reasoning_of_one_responses_provider_never_reaches_another(
        stream: bool, fakes: Any, proxy_factory: Any) -> None:
    f = await fakes(("first", "responses"), ("second", "responses"))
    config = build_config(profile_toml("first", f["first"], backups=["second"])
                          + profile_toml("second", f["second"]))
    proxy = await proxy_factory(config, fakes=f)
    client = _client(proxy.url, "first")
    asked: dict[str, Any] = {"model": "gpt-4o", "store": False,
                             "include": ["reasoning.encrypted_content"]}
    if stream:
        async with client.responses.stream(input="hello", **asked) as events:
            first = await events.get_final_response()
    else:
        first = await client.responses.create(input="hello", **asked)
    reasoning = [item.model_dump(exclude_none=True) for item in first.output
                 if item.type == "reasoning"]
    assert reasoning and reasoning[0]["encrypted_content"].startswith("enc:first:")
    history = [{"role": "user", "content": "hello"},
               {k: v for k, v in reasoning[0].items() if k != "id"},
               {"role": "user", "content": "more"}]
    # Back at the provider that made it, the item goes along untouched.
    again = await proxy.client.post("/proxy/first/v1/responses",
                                    json={**asked, "input": history})
    assert again.status_code == 200, again.text
    assert any(i.get("type") == "reasoning" for i in f["first"].requests[-1].json["input"])
    # After a failover the other provider would refuse it: it is left out, and named.
    f["first"].set_fault("529")
    moved = await proxy.client.post("/proxy/first/v1/responses",
                                    json={**asked, "input": history})
    assert moved.status_code == 200, moved.text
    assert moved.headers["x-claudex-provider"] == "second"
    assert [i.get("type", "message") for i in f["second"].requests[-1].json["input"]] == \
        ["message", "message"]
    await client.close()


async def test_an_anthropic_models_output_limit_is_learned_for_codex_like_requests(
        fakes: Any, proxy_factory: Any) -> None:
    """No max_output_tokens (as Codex CLI sends): claudex asks Anthropic for 32,000; a model
    with a lower limit says so in a 400, and the request is retried once at that limit."""
    f = await fakes(("up", "anthropic"))
    f["up"].max_output_tokens = 8192
    proxy = await proxy_factory(build_config(profile_toml("up", f["up"])), fakes=f)
    answer = await proxy.client.post("/v1/responses", json={"model": "gpt-5", "input": "hi"})
    assert answer.status_code == 200, answer.text
    assert [r.json["max_tokens"] for r in f["up"].requests] == [32_000, 8192]
    assert [r.status for r in f["up"].requests] == [400, 200]
    again = await proxy.client.post("/v1/responses", json={"model": "gpt-5", "input": "hi"})
    assert again.status_code == 200
    assert f["up"].requests[-1].json["max_tokens"] == 8192  # remembered
