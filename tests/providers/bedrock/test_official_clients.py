"""The Bedrock fake validated by the official clients: boto3's bedrock-runtime and anthropic's
AnthropicBedrock get their answers from it, and the errors AWS would give for its faults."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic
import boto3
import httpx
import pytest
from botocore.config import Config
from botocore.exceptions import ClientError, EventStreamError

from claudex.demo.fake_bedrock import BedrockFault, FakeBedrock
from claudex.providers.bedrock import BedrockFailure, parse_error
from tests.cloud_world import (
    API_KEY,
    KEY,
    MESSAGE,
    MODEL,
    TEMPORARY_KEY,
    UNKNOWN_KEY,
    isolate_cloud_env,
)

BODY = {"anthropic_version": "bedrock-2023-05-31", **MESSAGE}


@pytest.fixture(autouse=True)
def _no_machine_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_cloud_env(monkeypatch, tmp_path)


@pytest.fixture
async def bedrock() -> AsyncIterator[FakeBedrock]:
    async with FakeBedrock(keys=[KEY, TEMPORARY_KEY], api_keys=[API_KEY]) as fake:
        yield fake


def _boto(fake: FakeBedrock, key: Any = KEY, **credentials: Any) -> Any:
    keys = credentials or {"aws_access_key_id": key.access_key_id,
                           "aws_secret_access_key": key.secret_access_key,
                           "aws_session_token": key.session_token}
    once = Config(retries={"total_max_attempts": 1, "mode": "standard"})
    return boto3.client("bedrock-runtime", region_name=fake.region, endpoint_url=fake.base_url,
                        config=once, **keys)


def _sdk(fake: FakeBedrock, **credentials: Any) -> anthropic.AnthropicBedrock:
    if not credentials:
        credentials = {"aws_access_key": KEY.access_key_id, "aws_secret_key": KEY.secret_access_key}
    return anthropic.AnthropicBedrock(aws_region=fake.region, base_url=fake.base_url,
                                      max_retries=0, **credentials)


def _invoke(client: Any, body: dict[str, Any] = BODY, model: str = MODEL) -> dict[str, Any]:
    answer = client.invoke_model(modelId=model, body=json.dumps(body),
                                 contentType="application/json", accept="application/json")
    result: dict[str, Any] = json.loads(answer["body"].read())
    return result


def _stream(client: Any, body: dict[str, Any] = BODY) -> list[dict[str, Any]]:
    answer = client.invoke_model_with_response_stream(modelId=MODEL, body=json.dumps(body),
                                                      contentType="application/json")
    return [json.loads(event["chunk"]["bytes"]) for event in answer["body"]]


async def test_boto3_gets_whole_and_streamed_answers(bedrock: FakeBedrock) -> None:
    client = _boto(bedrock)
    message = await asyncio.to_thread(_invoke, client)
    assert message["content"][0]["text"] == f"Hello from bedrock (model {MODEL})."
    events = await asyncio.to_thread(_stream, client)
    assert events[0]["type"] == "message_start" and events[-1]["type"] == "message_stop"
    assert "amazon-bedrock-invocationMetrics" in events[-1]
    text = "".join(e["delta"]["text"] for e in events if e["type"] == "content_block_delta")
    assert text == message["content"][0]["text"]
    # boto3 percent-encodes the model id's colon; the signature still holds.
    assert [r.status for r in bedrock.requests] == [200, 200]


async def test_temporary_keys_sign_with_their_session_token(bedrock: FakeBedrock) -> None:
    message = await asyncio.to_thread(_invoke, _boto(bedrock, TEMPORARY_KEY))
    assert message["type"] == "message"
    assert bedrock.requests[-1].headers["x-amz-security-token"] == TEMPORARY_KEY.session_token


async def test_anthropic_bedrock_gets_answers_and_sends_betas_in_the_body(
        bedrock: FakeBedrock) -> None:
    client = _sdk(bedrock)
    message = await asyncio.to_thread(
        client.messages.create, model=MODEL, **MESSAGE)  # type: ignore[call-overload]
    assert message.content[0].text.startswith("Hello from bedrock")

    def streamed() -> str:
        with client.beta.messages.stream(model=MODEL, betas=["interleaved-thinking-2025-05-14"],
                                         **MESSAGE) as stream:  # type: ignore[arg-type]
            return stream.get_final_text()

    assert (await asyncio.to_thread(streamed)).startswith("Hello from bedrock")
    sent = bedrock.requests[-1]
    assert sent.path.endswith("/invoke-with-response-stream")
    assert sent.json["anthropic_beta"] == ["interleaved-thinking-2025-05-14"]
    assert "model" not in sent.json and "stream" not in sent.json


async def test_a_bedrock_api_key_is_a_bearer_token(bedrock: FakeBedrock,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    client = _sdk(bedrock, api_key=API_KEY)
    message = await asyncio.to_thread(
        client.messages.create, model=MODEL, **MESSAGE)  # type: ignore[call-overload]
    assert message.type == "message"
    assert bedrock.requests[-1].headers["authorization"] == f"Bearer {API_KEY}"
    # boto3 reads AWS_BEARER_TOKEN_BEDROCK too, but sends a Bearer token over HTTPS only
    # ("Bearer authorization requires an HTTPS endpoint"): not to this plain-HTTP fake.
    monkeypatch.setenv("AWS_BEARER_TOKEN_BEDROCK", API_KEY)
    from botocore.exceptions import InvalidEndpointConfigurationError
    with pytest.raises(InvalidEndpointConfigurationError, match="HTTPS"):
        boto_client = boto3.client("bedrock-runtime", region_name=bedrock.region,
                                   endpoint_url=bedrock.base_url)
        await asyncio.to_thread(_invoke, boto_client)
    refused = _sdk(bedrock, api_key="bedrock-api-key-nobody")
    with pytest.raises(anthropic.PermissionDeniedError) as raised:
        await asyncio.to_thread(
            refused.messages.create, model=MODEL, **MESSAGE)  # type: ignore[call-overload]
    assert raised.value.response.headers["x-amzn-errortype"].startswith("AccessDeniedException:")


@pytest.mark.parametrize(("fault", "code", "status", "failure"), [
    ("throttling", "ThrottlingException", 429, BedrockFailure.RATE_LIMITED),
    ("model_not_ready", "ModelNotReadyException", 429, BedrockFailure.RATE_LIMITED),
    ("quota", "ServiceQuotaExceededException", 400, BedrockFailure.QUOTA),
    ("unavailable", "ServiceUnavailableException", 503, BedrockFailure.SERVER),
    ("internal", "InternalServerException", 500, BedrockFailure.SERVER),
    ("model_timeout", "ModelTimeoutException", 408, BedrockFailure.SERVER),
    ("model_error", "ModelErrorException", 424, BedrockFailure.SERVER),
])
async def test_faults_reach_both_clients_as_aws_errors(
        bedrock: FakeBedrock, fault: BedrockFault, code: str, status: int,
        failure: BedrockFailure) -> None:
    bedrock.set_fault(fault, times=2)
    with pytest.raises(ClientError) as raised:
        await asyncio.to_thread(_invoke, _boto(bedrock))
    error = raised.value.response
    assert error["Error"]["Code"] == code  # boto3 maps it to its modelled exception class
    assert error["ResponseMetadata"]["HTTPStatusCode"] == status
    assert type(raised.value).__name__ == code
    with pytest.raises(anthropic.APIStatusError) as sdk_raised:
        await asyncio.to_thread(
            _sdk(bedrock).messages.create, model=MODEL, **MESSAGE)  # type: ignore[call-overload]
    response = sdk_raised.value.response
    assert response.status_code == status
    assert parse_error(status, response.headers, response.content).failure is failure
    assert (await asyncio.to_thread(_invoke, _boto(bedrock)))["type"] == "message"  # times=2


@pytest.mark.parametrize("fault", ["exception_before_content", "exception_after_content"])
async def test_exception_frames_reach_both_clients(bedrock: FakeBedrock, fault: BedrockFault
                                                   ) -> None:
    bedrock.set_fault(fault)
    with pytest.raises(EventStreamError) as raised:
        await asyncio.to_thread(_stream, _boto(bedrock))
    assert raised.value.response["Error"]["Code"] == "modelStreamErrorException"

    def sdk_stream() -> None:
        with _sdk(bedrock).messages.stream(model=MODEL, **MESSAGE) as stream:  # type: ignore[arg-type]
            stream.get_final_text()

    # The SDK's decoder refuses a non-200 frame (lib/bedrock/_stream_decoder.py).
    with pytest.raises(ValueError, match="Bad response code"):
        await asyncio.to_thread(sdk_stream)


@pytest.mark.parametrize(("key", "code", "words"), [
    (UNKNOWN_KEY, "UnrecognizedClientException", "security token included in the request is"),
    (type(KEY)(KEY.access_key_id, "a-wrong-secret"), "InvalidSignatureException",
     "does not match the signature you provided"),
    (type(TEMPORARY_KEY)(TEMPORARY_KEY.access_key_id, TEMPORARY_KEY.secret_access_key,
                         "another-session-token"), "UnrecognizedClientException",
     "security token included"),
])
async def test_bad_credentials_are_refused_as_aws_refuses_them(
        bedrock: FakeBedrock, key: Any, code: str, words: str) -> None:
    with pytest.raises(ClientError) as raised:
        await asyncio.to_thread(_invoke, _boto(bedrock, key))
    assert raised.value.response["Error"]["Code"] == code
    assert words in raised.value.response["Error"]["Message"]
    assert raised.value.response["ResponseMetadata"]["HTTPStatusCode"] == 403


async def test_a_stale_signature_is_refused(bedrock: FakeBedrock) -> None:
    bedrock.clock = lambda: __import__("time").time() + 600  # the service's clock 10 min ahead
    with pytest.raises(ClientError) as raised:
        await asyncio.to_thread(_invoke, _boto(bedrock))
    assert raised.value.response["Error"]["Code"] == "InvalidSignatureException"
    assert raised.value.response["Error"]["Message"].startswith("Signature expired: ")


@pytest.mark.parametrize(("body", "failure", "fields"), [
    ({**BODY, "stream": True}, BedrockFailure.DROP_FIELD, [("stream",)]),
    ({**BODY, "context_management": {"edits": []}}, BedrockFailure.DROP_FIELD,
     [("context_management",)]),
    ({**BODY, "output_config": {"effort": "low"}}, BedrockFailure.DROP_FIELD,
     [("output_config",)]),
    ({**BODY, "anthropic_beta": ["made-up-beta-2099-01-01"]}, BedrockFailure.DROP_BETAS, []),
    ({**BODY, "anthropic_version": "2023-06-01"}, BedrockFailure.CLIENT, []),
])
async def test_body_rules_as_boto3_sees_them(bedrock: FakeBedrock, body: dict[str, Any],
                                             failure: BedrockFailure,
                                             fields: list[tuple[str]]) -> None:
    with pytest.raises(ClientError) as raised:
        await asyncio.to_thread(_invoke, _boto(bedrock), body)
    response = raised.value.response
    assert response["Error"]["Code"] == "ValidationException"
    headers = response["ResponseMetadata"]["HTTPHeaders"]
    described = parse_error(400, headers, json.dumps(
        {"message": response["Error"]["Message"]}).encode())
    assert described.failure is failure and list(described.fields) == fields


async def test_a_field_with_its_beta_is_taken_and_an_unknown_model_is_not(
        bedrock: FakeBedrock) -> None:
    body = {**BODY, "anthropic_beta": ["context-management-2025-06-27"],
            "context_management": {"edits": []}}
    assert (await asyncio.to_thread(_invoke, _boto(bedrock), body))["type"] == "message"
    with pytest.raises(ClientError) as raised:
        await asyncio.to_thread(_invoke, _boto(bedrock), BODY, "anthropic.claude-nothing-v9:0")
    assert raised.value.response["Error"]["Message"] == "The provided model identifier is invalid."


async def test_no_authorization_at_all(bedrock: FakeBedrock) -> None:
    async with httpx.AsyncClient() as client:
        answer = await client.post(f"{bedrock.base_url}/model/{MODEL}/invoke", json=BODY)
    assert answer.status_code == 403
    assert answer.json() == {"Message": "Authorization header is missing"}
    assert answer.headers["x-amzn-errortype"] == (
        "AccessDeniedException:http://internal.amazon.com/coral/com.amazon.coral.service/")
