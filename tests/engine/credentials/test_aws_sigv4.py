"""The SigV4 signer: its keys (given, botocore's chain, a profile, refreshable ones with an
injected clock), its signatures against the Bedrock fake, and no secret in what it says."""

from __future__ import annotations

import asyncio
import datetime
import json
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from botocore.credentials import RefreshableCredentials

from claudex.demo.fake_bedrock import FakeBedrock
from claudex.engine.credentials.aws_sigv4 import (
    AwsCredentials,
    AwsCredentialsError,
    AwsCredentialSource,
    SigV4Signer,
    bearer_headers,
    bedrock_api_key,
)
from claudex.providers.bedrock import EventStreamToSse, bedrock_body, invoke_url
from claudex.providers.sse import split_events
from tests.cloud_world import KEY, MESSAGE, MODEL, TEMPORARY_KEY, isolate_cloud_env

STATIC = AwsCredentials(KEY.access_key_id, KEY.secret_access_key)


@pytest.fixture(autouse=True)
def _no_machine_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_cloud_env(monkeypatch, tmp_path)


@pytest.fixture
async def bedrock() -> AsyncIterator[FakeBedrock]:
    async with FakeBedrock(keys=[KEY, TEMPORARY_KEY]) as fake:
        yield fake


async def _post(signer: SigV4Signer, url: str, body: bytes, *,
                sent_body: bytes | None = None) -> httpx.Response:
    headers = {"content-type": "application/json", "host": httpx.URL(url).netloc.decode()}
    headers.update(await signer.sign("POST", url, headers, body))
    async with httpx.AsyncClient() as client:
        return await client.post(url, content=body if sent_body is None else sent_body,
                                 headers=headers)


def _body() -> bytes:
    return json.dumps(bedrock_body({"model": MODEL, **MESSAGE})).encode()


async def test_signed_requests_pass_the_fake_whole_and_streamed(bedrock: FakeBedrock) -> None:
    signer = SigV4Signer(AwsCredentialSource(static=STATIC), region="us-east-1")
    whole = await _post(signer, invoke_url(bedrock.base_url, MODEL, stream=False), _body())
    assert whole.status_code == 200, whole.text
    streamed = await _post(signer, invoke_url(bedrock.base_url, MODEL, stream=True), _body())
    assert streamed.headers["content-type"] == "application/vnd.amazon.eventstream"
    converter = EventStreamToSse()
    sse = converter.feed(streamed.content)
    converter.finish()
    text = "".join(json.loads(e.data)["delta"]["text"] for e in split_events(bytearray(sse))
                   if e.event == "content_block_delta")
    assert text == whole.json()["content"][0]["text"]


async def test_a_body_changed_after_signing_is_refused(bedrock: FakeBedrock) -> None:
    signer = SigV4Signer(AwsCredentialSource(static=STATIC), region="us-east-1")
    url = invoke_url(bedrock.base_url, MODEL, stream=False)
    tampered = await _post(signer, url, _body(), sent_body=_body().replace(b"hello", b"HELLO"))
    assert tampered.status_code == 403
    assert tampered.headers["x-amzn-errortype"].startswith("InvalidSignatureException:")


async def test_the_wrong_service_or_region_is_refused(bedrock: FakeBedrock) -> None:
    url = invoke_url(bedrock.base_url, MODEL, stream=False)
    mantle = SigV4Signer(AwsCredentialSource(static=STATIC), region="us-east-1",
                         service="bedrock-mantle")
    assert "correct service: 'bedrock'" in (await _post(mantle, url, _body())).json()["message"]
    elsewhere = SigV4Signer(AwsCredentialSource(static=STATIC), region="eu-west-1")
    assert "valid region" in (await _post(elsewhere, url, _body())).json()["message"]


async def test_the_chain_finds_environment_keys_in_a_thread(
        bedrock: FakeBedrock, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", TEMPORARY_KEY.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", TEMPORARY_KEY.secret_access_key)
    monkeypatch.setenv("AWS_SESSION_TOKEN", str(TEMPORARY_KEY.session_token))
    source = AwsCredentialSource()
    signer = SigV4Signer(source, region="us-east-1")
    answer = await _post(signer, invoke_url(bedrock.base_url, MODEL, stream=False), _body())
    assert answer.status_code == 200, answer.text
    assert source.where == "the AWS credential chain (env)"


async def test_a_named_profile_is_read_from_the_credentials_file(
        bedrock: FakeBedrock, tmp_path: Path) -> None:
    (tmp_path / "aws-credentials").write_text(
        f"[claudex-test]\naws_access_key_id = {KEY.access_key_id}\n"
        f"aws_secret_access_key = {KEY.secret_access_key}\n")
    source = AwsCredentialSource(profile="claudex-test")
    signer = SigV4Signer(source, region="us-east-1")
    answer = await _post(signer, invoke_url(bedrock.base_url, MODEL, stream=False), _body())
    assert answer.status_code == 200, answer.text
    assert source.where == "AWS profile 'claudex-test' (shared-credentials-file)"


async def test_no_credentials_is_a_sentence_not_a_traceback() -> None:
    with pytest.raises(AwsCredentialsError, match="no AWS credentials found in the AWS "
                                                  "credential chain"):
        await AwsCredentialSource().get()
    with pytest.raises(AwsCredentialsError, match="profile 'absent'"):
        await AwsCredentialSource(profile="absent").get()


class _Clock:
    def __init__(self) -> None:
        self.now = datetime.datetime(2026, 1, 1, tzinfo=datetime.UTC)

    def __call__(self) -> datetime.datetime:
        return self.now


def _refreshable(clock: _Clock, refreshed: list[str]) -> RefreshableCredentials:
    def refresh() -> dict[str, Any]:
        refreshed.append(threading.current_thread().name)
        number = len(refreshed)
        return {"access_key": f"AKIDREFRESHED{number:07d}", "secret_key": f"secret-{number}",
                "token": f"token-{number}",
                "expiry_time": (clock.now + datetime.timedelta(hours=1)).isoformat()}

    return RefreshableCredentials(
        "AKIDFIRST0000000001", "secret-0", "token-0",
        clock.now + datetime.timedelta(hours=1), refresh, "test", time_fetcher=clock)


async def test_refreshable_keys_refresh_when_botocore_says_once_for_all_and_off_the_loop(
        ) -> None:
    clock, refreshed = _Clock(), []
    credentials = _refreshable(clock, refreshed)
    source = AwsCredentialSource(resolve=lambda: credentials)
    assert (await source.get()).access_key_id == "AKIDFIRST0000000001"
    clock.now += datetime.timedelta(minutes=40)  # 20 min left: outside both refresh windows
    assert (await source.get()).access_key_id == "AKIDFIRST0000000001"
    assert refreshed == []
    clock.now += datetime.timedelta(minutes=11)  # 9 min left: the mandatory window
    keys = await asyncio.gather(*(source.get() for _ in range(8)))
    assert {k.access_key_id for k in keys} == {"AKIDREFRESHED0000001"}
    assert len(refreshed) == 1 and refreshed[0] != threading.current_thread().name
    assert keys[0].session_token == "token-1"


async def test_a_failed_refresh_names_the_source_and_no_key() -> None:
    def broken() -> Any:
        raise RuntimeError("the STS endpoint said no")

    clock = _Clock()
    credentials = RefreshableCredentials("AKIDFIRST0000000001", "secret-0", None,
                                         clock.now, broken, "sso", time_fetcher=clock)
    source = AwsCredentialSource(resolve=lambda: credentials)
    with pytest.raises(AwsCredentialsError) as raised:
        await source.get()
    assert "the AWS credential chain" in str(raised.value)
    assert "secret-0" not in str(raised.value)


def test_secrets_stay_out_of_reprs_and_the_api_key_is_a_bearer() -> None:
    shown = repr(AwsCredentials("AKIDCLAUDEXTEST00001", "super-secret-value", "session-xyz"))
    assert "super-secret-value" not in shown and "session-xyz" not in shown
    assert bedrock_api_key({"AWS_BEARER_TOKEN_BEDROCK": " key-1 "}) == "key-1"
    assert bedrock_api_key({}) is None
    assert bearer_headers("key-1") == {"Authorization": "Bearer key-1"}
