"""The Vertex fake validated by anthropic's AnthropicVertex: a service-account file whose
token_uri is the fake token endpoint, google-auth minting from it, the routes answering, and
Google's errors for the faults."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import pytest

from claudex.demo.fake_google_token import FakeGoogleTokenServer
from claudex.demo.fake_vertex import FakeVertex, VertexFault
from claudex.engine.credentials.google_tokens import GoogleTokenSource
from claudex.providers.vertex import VertexFailure, parse_error, predict_url, vertex_body
from tests.cloud_world import (
    MESSAGE,
    PROJECT,
    VERTEX_MODEL,
    ServiceAccount,
    isolate_cloud_env,
    service_account,
)


@dataclass
class Google:
    tokens: FakeGoogleTokenServer
    vertex: FakeVertex
    account: ServiceAccount

    def client(self, region: str = "us-east5") -> anthropic.AnthropicVertex:
        return anthropic.AnthropicVertex(region=region, project_id=PROJECT,
                                         base_url=self.vertex.base_url, max_retries=0)


@pytest.fixture
async def google(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> AsyncIterator[Google]:
    isolate_cloud_env(monkeypatch, tmp_path)
    async with FakeGoogleTokenServer() as tokens, FakeVertex(tokens=tokens) as vertex:
        account = service_account(tmp_path, tokens.token_url)
        tokens.add_service_account(account.email, account.key.public_key())
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(account.path))
        yield Google(tokens, vertex, account)


def _create(client: anthropic.AnthropicVertex, **extra: Any) -> Any:
    return client.messages.create(model=VERTEX_MODEL, **MESSAGE, **extra)  # type: ignore[call-overload]


async def test_whole_streamed_and_counted(google: Google) -> None:
    client = google.client()
    message = await asyncio.to_thread(_create, client)
    assert message.content[0].text == f"Hello from vertex (model {VERTEX_MODEL})."

    def streamed() -> str:
        with client.messages.stream(model=VERTEX_MODEL, **MESSAGE) as stream:  # type: ignore[arg-type]
            return stream.get_final_text()

    assert await asyncio.to_thread(streamed) == message.content[0].text
    counted = await asyncio.to_thread(client.messages.count_tokens, model=VERTEX_MODEL,
                                      messages=MESSAGE["messages"])  # type: ignore[arg-type]
    assert counted.input_tokens > 0
    paths = [r.path.rsplit("/", 1)[-1] for r in google.vertex.requests]
    assert paths == [f"{VERTEX_MODEL}:rawPredict", f"{VERTEX_MODEL}:streamRawPredict",
                     "count-tokens:rawPredict"]
    bodies = [r.json for r in google.vertex.requests]
    assert all(b["anthropic_version"] == "vertex-2023-10-16" for b in bodies)
    assert "model" not in bodies[0] and bodies[1]["stream"] is True
    assert bodies[2]["model"] == VERTEX_MODEL
    assert google.tokens.request_count == 1  # one token for the three calls


async def test_the_global_region_and_betas_in_the_header(google: Google) -> None:
    client = google.client("global")
    await asyncio.to_thread(lambda: client.beta.messages.create(
        model=VERTEX_MODEL, betas=["context-1m-2025-08-07"], **MESSAGE))  # type: ignore[arg-type]
    sent = google.vertex.requests[-1]
    assert "/locations/global/" in sent.path
    assert sent.headers["anthropic-beta"] == "context-1m-2025-08-07"
    assert "anthropic_beta" not in sent.json


@pytest.mark.parametrize(("fault", "status", "failure", "error_class"), [
    ("resource_exhausted", 429, VertexFailure.RATE_LIMITED, anthropic.RateLimitError),
    ("unavailable", 503, VertexFailure.SERVER, anthropic.ServiceUnavailableError),
    ("internal", 500, VertexFailure.SERVER, anthropic.InternalServerError),
    ("permission_denied", 403, VertexFailure.AUTH, anthropic.PermissionDeniedError),
    ("model_not_enabled", 400, VertexFailure.MODEL_UNAVAILABLE, anthropic.BadRequestError),
])
async def test_faults_are_googles_errors(google: Google, fault: VertexFault, status: int,
                                         failure: VertexFailure, error_class: type) -> None:
    google.vertex.set_fault(fault, times=1)
    with pytest.raises(error_class) as raised:
        await asyncio.to_thread(_create, google.client())
    response = raised.value.response
    assert response.status_code == status
    assert parse_error(status, response.content).failure is failure
    assert (await asyncio.to_thread(_create, google.client())).type == "message"


async def test_an_expired_token_is_a_401_and_claudex_mints_again(google: Google) -> None:
    import httpx

    source = GoogleTokenSource(credentials_file=google.account.path)
    url = predict_url(google.vertex.base_url, PROJECT, "us-east5", VERTEX_MODEL, stream=False)
    body = vertex_body({"model": VERTEX_MODEL, **MESSAGE})

    async def call() -> httpx.Response:
        token = await source.token()
        async with httpx.AsyncClient() as client:
            return await client.post(url, json=body, headers={"authorization": f"Bearer {token}"})

    assert (await call()).status_code == 200
    google.tokens.expire_all()  # the service no longer takes the cached token
    refused = await call()
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"] == 'Bearer realm="https://accounts.google.com/"'
    error = parse_error(401, refused.content)
    assert error.failure is VertexFailure.TOKEN_REJECTED and error.status == "UNAUTHENTICATED"
    source.invalidate(refused.request.headers["authorization"].removeprefix("Bearer "))
    assert (await call()).status_code == 200
    assert source.mints == 2
