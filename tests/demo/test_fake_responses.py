"""The Responses fake: JSON and event streams the openai SDK reads, faults, and the ChatGPT
backend's rules when switched on."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import httpx
import openai
import pytest

from claudex.demo.fake_provider import FakeProvider
from claudex.demo.fake_responses import ChatGPTRules


@pytest.fixture
async def fake() -> AsyncIterator[FakeProvider]:
    async with FakeProvider("codex", "responses", strict_models=False) as provider:
        yield provider


async def test_the_openai_sdk_reads_json_and_streams(fake: FakeProvider) -> None:
    client = openai.AsyncOpenAI(base_url=fake.base_url, api_key="k", max_retries=0)
    response = await client.responses.create(model="gpt-5", input="hello",
                                             instructions="be brief")
    assert "codex" in response.output_text and response.usage is not None
    async with client.responses.stream(model="gpt-5", input="events:4") as stream:
        deltas = [e.delta async for e in stream if e.type == "response.output_text.delta"]
        final = await stream.get_final_response()
    assert len(deltas) == 4 and final.output_text == "".join(deltas)
    tools: list[dict[str, object]] = [{"type": "function", "name": "lookup", "strict": False,
                                       "parameters": {"type": "object", "properties": {
                                           "q": {"type": "string"}}}}]
    called = await client.responses.create(model="gpt-5", input="use tool",
                                           tools=tools)  # type: ignore[arg-type]
    [call] = [item for item in called.output if item.type == "function_call"]
    assert call.name == "lookup" and json.loads(call.arguments).keys() == {"q"}
    await client.close()


async def test_stream_error_fault_sends_an_error_event(fake: FakeProvider) -> None:
    fake.set_fault("stream_error", cut_after_events=1)
    async with httpx.AsyncClient() as http:
        resp = await http.post(fake.base_url + "/responses",
                               json={"model": "m", "input": "events:5", "stream": True})
    kinds = [line[7:] for line in resp.text.split("\n") if line.startswith("event: ")]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "error" and "response.completed" not in kinds


@pytest.mark.parametrize(("change", "status", "detail"), [
    # pwnkit PR 330, llxprt-code issue 1197: the backend's answer to a request without it.
    ({"instructions": None}, 400, "Instructions are required"),
    ({"input": "hi"}, 400, "Input must be a list"),  # cubezhao/ai-tools-mng issue 79
    ({"store": True}, 400, "Store must be set to false"),
    ({"stream": False}, 400, "Stream must be set to true"),
    ({"max_output_tokens": 10}, 400, "Unsupported parameter: max_output_tokens"),
    ({"temperature": 0.2}, 400, "Unsupported parameter: temperature"),
])
async def test_chatgpt_rules_refuse_as_the_backend_does(
    fake: FakeProvider, change: dict[str, object], status: int, detail: str
) -> None:
    fake.chatgpt = ChatGPTRules()
    ok_body = {"model": "gpt-5-codex", "instructions": "",
               "input": [{"type": "message", "role": "user",
                          "content": [{"type": "input_text", "text": "hi"}]}],
               "store": False, "stream": True}
    body = {k: v for k, v in {**ok_body, **change}.items() if v is not None}
    headers = {"authorization": "Bearer t", "chatgpt-account-id": "acct-fake"}
    async with httpx.AsyncClient() as http:
        resp = await http.post(fake.base_url + "/responses", json=body, headers=headers)
        assert (resp.status_code, resp.json()) == (status, {"detail": detail})
        ok = await http.post(fake.base_url + "/responses", headers=headers, json=ok_body)
        assert ok.status_code == 200 and "response.completed" in ok.text
        no_account = await http.post(fake.base_url + "/responses", json=body,
                                     headers={"authorization": "Bearer t"})
        assert no_account.status_code == 401
