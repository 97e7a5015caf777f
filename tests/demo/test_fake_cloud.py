"""The cloud fakes' own rules: the token endpoint checks assertions as Google does, Vertex's
project, model and body rules, and the fakes record what they were sent."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

from claudex.demo.fake_google_token import (
    GOOGLE_TOKEN_AUDIENCE,
    JWT_BEARER_GRANT,
    FakeGoogleTokenServer,
)
from claudex.demo.fake_vertex import FakeVertex
from claudex.providers.vertex import VertexFailure, parse_error, predict_url

EMAIL = "robot@claudex-test.iam.gserviceaccount.com"
KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _assertion(key: rsa.RSAPrivateKey = KEY, alg: str = "RS256", **claims: Any) -> str:
    now = int(time.time())
    payload = {"iss": EMAIL, "aud": GOOGLE_TOKEN_AUDIENCE, "iat": now, "exp": now + 3600,
               "scope": "https://www.googleapis.com/auth/cloud-platform", **claims}
    signing_input = f"{_b64(json.dumps({'alg': alg, 'typ': 'JWT'}).encode())}." \
                    f"{_b64(json.dumps(payload).encode())}"
    signature = key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
    return f"{signing_input}.{_b64(signature)}"


@pytest.fixture
async def tokens() -> AsyncIterator[FakeGoogleTokenServer]:
    async with FakeGoogleTokenServer() as server:
        server.add_service_account(EMAIL, KEY.public_key())
        yield server


async def _grant(server: FakeGoogleTokenServer, assertion: str,
                 grant: str = JWT_BEARER_GRANT) -> httpx.Response:
    async with httpx.AsyncClient() as client:
        return await client.post(server.token_url,
                                 data={"grant_type": grant, "assertion": assertion})


async def test_a_good_assertion_gets_a_token_with_an_expiry(tokens: FakeGoogleTokenServer) -> None:
    answer = await _grant(tokens, _assertion())
    assert answer.status_code == 200
    body = answer.json()
    assert body["token_type"] == "Bearer" and body["expires_in"] == 3599
    assert tokens.valid(body["access_token"])
    tokens.revoke(body["access_token"])
    assert not tokens.valid(body["access_token"])


@pytest.mark.parametrize(("assertion", "error", "words"), [
    (lambda: _assertion(rsa.generate_private_key(public_exponent=65537, key_size=2048)),
     "invalid_grant", "Invalid JWT Signature."),
    (lambda: _assertion(alg="HS256"), "invalid_grant", "Invalid JWT Signature."),
    (lambda: _assertion(iss="nobody@x.iam.gserviceaccount.com"), "invalid_grant",
     "Invalid grant: account not found"),
    (lambda: _assertion(aud="https://example.com/token"), "invalid_grant",
     "Invalid JWT: Failed audience check."),
    (lambda: _assertion(scope=""), "invalid_scope",
     "Invalid OAuth scope or ID token audience provided."),
    (lambda: _assertion(iat=int(time.time()) - 7200, exp=int(time.time()) - 3600),
     "invalid_grant", "Invalid JWT: Token must be a short-lived token (60 minutes)"),
    (lambda: _assertion(exp=int(time.time()) + 7200), "invalid_grant",
     "Invalid JWT: Token must be a short-lived token"),
    (lambda: "not.a-jwt", "invalid_grant", "Invalid JWT Signature."),
])
async def test_bad_assertions_are_refused_in_googles_words(
        tokens: FakeGoogleTokenServer, assertion: Any, error: str, words: str) -> None:
    answer = await _grant(tokens, assertion())
    assert answer.status_code == 400
    assert answer.json()["error"] == error
    assert answer.json()["error_description"].startswith(words)
    assert tokens.minted == {}


async def test_another_grant_type_is_refused(tokens: FakeGoogleTokenServer) -> None:
    answer = await _grant(tokens, _assertion(), grant="refresh_token")
    assert answer.json() == {"error": "unsupported_grant_type",
                             "error_description": "Invalid grant_type: refresh_token"}


@pytest.fixture
async def vertex() -> AsyncIterator[FakeVertex]:
    async with FakeVertex(valid_tokens=["token-1"],
                          enabled=["claude-sonnet-4-5@20250929"]) as fake:
        yield fake


async def _predict(fake: FakeVertex, body: dict[str, Any], *, model: str,
                   project: str = "claudex-test",
                   token: str = "token-1") -> httpx.Response:
    url = predict_url(fake.base_url, project, "us-east5", model, stream=False)
    async with httpx.AsyncClient() as client:
        return await client.post(url, json=body, headers={"authorization": f"Bearer {token}"})


BODY = {"anthropic_version": "vertex-2023-10-16", "max_tokens": 10,
        "messages": [{"role": "user", "content": "hi"}]}


@pytest.mark.parametrize(("kwargs", "body", "status", "failure", "words"), [
    ({"token": "nope"}, BODY, 401, VertexFailure.TOKEN_REJECTED, "Request had invalid auth"),
    ({"project": "someone-else"}, BODY, 403, VertexFailure.AUTH, "Permission 'aiplatform"),
    ({"model": "claude-nothing@2099"}, BODY, 404, VertexFailure.MODEL_UNAVAILABLE,
     "Publisher Model"),
    ({"model": "claude-haiku-4-5@20251001"}, BODY, 400, VertexFailure.MODEL_UNAVAILABLE,
     "Project `claudex-test` is not allowed to use Publisher Model"),
    ({}, {**BODY, "anthropic_version": "bedrock-2023-05-31"}, 400, VertexFailure.CLIENT,
     "anthropic_version"),
    ({}, {**BODY, "model": "claude-sonnet-4-5@20250929"}, 400, VertexFailure.CLIENT,
     "model: Extra inputs are not permitted"),
])
async def test_vertex_refusals(vertex: FakeVertex, kwargs: dict[str, str], body: dict[str, Any],
                               status: int, failure: VertexFailure, words: str) -> None:
    answer = await _predict(vertex, body, **{"model": "claude-sonnet-4-5@20250929", **kwargs})
    assert answer.status_code == status
    error = parse_error(status, answer.content)
    assert error.failure is failure and words in error.message
    assert vertex.requests[-1].status == status


async def test_vertex_answers_a_good_request_and_records_it(vertex: FakeVertex) -> None:
    answer = await _predict(vertex, BODY, model="claude-sonnet-4-5@20250929")
    assert answer.status_code == 200 and answer.json()["id"].startswith("msg_vrtx_")
    assert vertex.requests[-1].json == BODY


def test_a_service_account_file_helper_is_private(tmp_path: Path) -> None:
    from tests.cloud_world import service_account

    account = service_account(tmp_path, "http://127.0.0.1:1/token")
    assert account.path.stat().st_mode & 0o777 == 0o600
