"""OAuth tokens across machines: two `claudex serve` processes with their own credentials files
(two machines, one login copied to both) and one redis-server. With a fleet key the refresh
winner leaves the new tokens in Redis encrypted and the other takes them without a grant of its
own; without one, tokens never enter Redis and each machine refreshes on its own."""

from __future__ import annotations

import asyncio
import json
import stat
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.fernet import Fernet
from redis.asyncio import Redis

from claudex.demo.fake_oauth import FakeTokenServer
from tests.conftest import anthropic_body
from tests.engine.credentials.test_proxy_oauth import oauth_profile, write_credentials
from tests.fleet_world import FleetWorld, fleet_of
from tests.redis_server import RedisServer

pytestmark = pytest.mark.timeout(120)

SECRETS = ("tok-old", "tok-fresh", "refresh-1", "refresh-2")


async def redis_contents(server: RedisServer) -> dict[str, str]:
    """Every key and string value in the fleet's Redis."""
    client = Redis.from_url(server.url, decode_responses=True)
    try:
        found: dict[str, str] = {}
        async for key in client.scan_iter(match="*"):
            kind = await client.type(key)
            found[key] = str(await client.get(key)) if kind == "string" else f"<{kind}>"
        return found
    finally:
        await client.aclose()


class TwoMachines:
    def __init__(self, world: FleetWorld, creds: dict[str, Path]) -> None:
        self.world = world
        self.creds = creds

    async def ask(self, name: str) -> httpx.Response:
        return await self.world.http.post(self.world.instances[name].url + "/v1/messages",
                                          json=anthropic_body())

    def file(self, name: str) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.creds[name].read_text())["claudeAiOauth"]
        return doc


@pytest.fixture
async def machines(redis: RedisServer, fakes: Any, tmp_path: Path,
                   request: pytest.FixtureRequest) -> AsyncIterator[tuple[TwoMachines, Any]]:
    """`a` and `b`, each with its own credentials file holding the same login; the fleet key
    per instance comes from the test's indirect parameter (instance -> Fernet key; none: no
    `secret_env`)."""
    keys: dict[str, str] = getattr(request, "param", {})
    f = await fakes(("claude", "anthropic"),)
    creds = {n: tmp_path / f"{n}-credentials.json" for n in ("a", "b")}
    for path in creds.values():
        write_credentials(path, "tok-old", refresh="refresh-1")
    f["claude"].faults.valid_tokens = {"tok-old"}
    async with FakeTokenServer() as tokens:
        world = FleetWorld(
            redis, f, tmp_path,
            profiles=lambda n: oauth_profile(f["claude"], creds[n], tokens.token_url),
            fleet_extra='secret_env = "CLAUDEX_FLEET_KEY"\n' if keys else "",
            env={n: {"CLAUDEX_FLEET_KEY": k} for n, k in keys.items()})
        try:
            await asyncio.gather(*(world.spawn(n) for n in ("a", "b")))
            await world.wait_for(["a", "b"], lambda s: len(fleet_of(s)["instances"]) == 2)
            two = TwoMachines(world, creds)
            for name in ("a", "b"):  # each has read tok-old and uses it
                assert (await two.ask(name)).status_code == 200
            yield two, (f["claude"], tokens)
        finally:
            await world.close()


KEY = Fernet.generate_key().decode()


@pytest.mark.parametrize("machines", [{"a": KEY, "b": KEY}], indirect=True)
async def test_with_a_fleet_key_one_grant_serves_both_machines_through_ciphertext(
    machines: tuple[TwoMachines, Any], redis: RedisServer,
) -> None:
    two, (claude, tokens) = machines
    tokens.set_next("tok-fresh", "refresh-2", expires_in=3600)
    tokens.valid_refresh_tokens = {"refresh-1"}  # single-use: a second grant would fail
    claude.faults.valid_tokens = {"tok-fresh"}  # tok-old is revoked: every instance gets a 401
    answers = await asyncio.gather(*(two.ask(n) for n in ("a", "b") for _ in range(3)))
    assert [r.status_code for r in answers] == [200] * 6, [r.text for r in answers]
    assert tokens.call_count == 1  # refresh-1 spent once, by one machine
    for name in ("a", "b"):
        assert two.file(name)["accessToken"] == "tok-fresh"
        assert two.file(name)["refreshToken"] == "refresh-2"
        assert stat.S_IMODE(two.creds[name].stat().st_mode) == 0o600
        assert fleet_of(await two.world.status(name))["tokens"] == "shared encrypted"
    contents = await redis_contents(redis)
    everything = "\n".join(f"{k} {v}" for k, v in contents.items())
    assert not any(secret in everything for secret in SECRETS), everything
    sealed = [v for k, v in contents.items() if k.startswith("claudex:token:refresh:")]
    assert len(sealed) == 1
    assert json.loads(Fernet(KEY.encode()).decrypt(sealed[0].encode()))["access_token"] == (
        "tok-fresh")
    for inst in two.world.instances.values():
        assert not any(KEY in line for line in inst.log)


async def test_without_a_key_tokens_never_enter_redis_and_each_machine_refreshes_its_own(
    machines: tuple[TwoMachines, Any], redis: RedisServer,
) -> None:
    two, (claude, tokens) = machines
    claude.faults.valid_tokens = {"fake-access-1", "fake-access-2"}
    answers = await asyncio.gather(*(two.ask(n) for n in ("a", "b") for _ in range(3)))
    assert [r.status_code for r in answers] == [200] * 6, [r.text for r in answers]
    assert tokens.call_count == 2  # the lock made them take turns; neither could share
    assert {two.file("a")["accessToken"], two.file("b")["accessToken"]} == {
        "fake-access-1", "fake-access-2"}
    contents = await redis_contents(redis)
    everything = "\n".join(f"{k} {v}" for k, v in contents.items())
    assert not any(k.startswith("claudex:token:") for k in contents), contents
    assert not any(s in everything for s in (*SECRETS, "fake-access", "fake-refresh"))


@pytest.mark.parametrize("machines", [{"a": KEY, "b": Fernet.generate_key().decode()}],
                         indirect=True)
async def test_a_record_that_does_not_decrypt_is_logged_and_refreshed_locally(
    machines: tuple[TwoMachines, Any], redis: RedisServer,
) -> None:
    two, (claude, tokens) = machines
    claude.faults.valid_tokens = {"fake-access-1", "fake-access-2"}
    answers = await asyncio.gather(*(two.ask(n) for n in ("a", "b") for _ in range(3)))
    assert [r.status_code for r in answers] == [200] * 6, [r.text for r in answers]
    # The second through the lock met ciphertext of another key: it refreshed on its own.
    assert tokens.call_count == 2
    warned = [line for inst in two.world.instances.values() for line in inst.log
              if "a token another instance shared could not be read" in line]
    assert len(warned) == 1, warned
    assert "does not decrypt with this key" in warned[0]
    everything = "\n".join(f"{k} {v}" for k, v in (await redis_contents(redis)).items())
    assert not any(s in everything for s in (*SECRETS, "fake-access", "fake-refresh"))
