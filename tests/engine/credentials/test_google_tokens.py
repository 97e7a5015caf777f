"""Google access tokens: minted by google-auth from a service account against the fake token
endpoint, cached by an injected clock, one mint for concurrent callers, minted again after a
401, and errors that say what and never a key."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from claudex.demo.fake_google_token import FakeGoogleTokenServer
from claudex.engine.credentials.google_tokens import GoogleTokenError, GoogleTokenSource
from tests.cloud_world import PROJECT, isolate_cloud_env, service_account


@pytest.fixture(autouse=True)
def _no_machine_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate_cloud_env(monkeypatch, tmp_path)


@pytest.fixture
async def google() -> AsyncIterator[FakeGoogleTokenServer]:
    async with FakeGoogleTokenServer() as server:
        yield server


class _Clock:
    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now


async def test_tokens_are_cached_until_shortly_before_expiry(
        google: FakeGoogleTokenServer, tmp_path: Path) -> None:
    account = service_account(tmp_path, google.token_url)
    google.add_service_account(account.email, account.key.public_key())
    clock = _Clock()
    source = GoogleTokenSource(credentials_file=account.path, clock=clock)
    first = await source.token()
    assert google.valid(first) and source.project_id == PROJECT
    clock.now += 3599 - 301  # expires_in 3599: still outside the five minutes
    assert await source.token() == first and source.mints == 1
    clock.now += 2
    second = await source.token()
    assert second != first and source.mints == 2
    assert google.request_count == 2
    form = google.requests[0]
    assert form.headers["content-type"] == "application/x-www-form-urlencoded"


async def test_concurrent_callers_share_one_mint(google: FakeGoogleTokenServer,
                                                tmp_path: Path) -> None:
    account = service_account(tmp_path, google.token_url)
    google.add_service_account(account.email, account.key.public_key())
    google.delay_s = 0.2
    source = GoogleTokenSource(credentials_file=account.path)
    tokens = await asyncio.gather(*(source.token() for _ in range(10)))
    assert len(set(tokens)) == 1 and google.request_count == 1


async def test_a_refused_token_is_minted_again_once(google: FakeGoogleTokenServer,
                                                    tmp_path: Path) -> None:
    account = service_account(tmp_path, google.token_url)
    google.add_service_account(account.email, account.key.public_key())
    source = GoogleTokenSource(credentials_file=account.path)
    first = await source.token()
    source.invalidate("not-the-current-token")  # an older token's 401 changes nothing
    assert await source.token() == first
    source.invalidate(first)
    second = await source.token()
    assert second != first and google.request_count == 2


async def test_a_key_the_endpoint_does_not_know_is_a_sentence(
        google: FakeGoogleTokenServer, tmp_path: Path) -> None:
    account = service_account(tmp_path, google.token_url)
    source = GoogleTokenSource(credentials_file=account.path)
    with pytest.raises(GoogleTokenError) as raised:
        await source.token()
    message = str(raised.value)
    assert "the token endpoint refused credentials file" in message
    assert "Invalid grant: account not found" in message
    assert "PRIVATE KEY" not in message
    another_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    google.add_service_account(account.email, another_key.public_key())
    with pytest.raises(GoogleTokenError, match="Invalid JWT Signature"):
        await source.token()


async def test_a_missing_or_broken_file_is_a_sentence(tmp_path: Path) -> None:
    with pytest.raises(GoogleTokenError, match=r"absent\.json' could not be read: No such file"):
        await GoogleTokenSource(credentials_file=tmp_path / "absent.json").token()
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(GoogleTokenError, match=r"broken\.json' is not a Google credentials file"):
        await GoogleTokenSource(credentials_file=broken).token()
    with pytest.raises(GoogleTokenError, match="application default credentials"):
        await GoogleTokenSource().token()
