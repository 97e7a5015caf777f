"""OAuth refresh across a fleet: three `claudex serve` processes sharing one credentials file and
one redis-server. Every instance gets a 401 at once; the refresh token is spent once."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from claudex.demo.fake_oauth import FakeTokenServer
from tests.conftest import anthropic_body
from tests.engine.credentials.test_proxy_oauth import oauth_profile, write_credentials
from tests.fleet_world import FleetWorld, fleet_of
from tests.redis_server import RedisServer

pytestmark = pytest.mark.timeout(120)


async def test_every_instance_gets_a_401_at_once_and_one_refresh_grant_is_made(
    redis: RedisServer, fakes: Any, tmp_path: Path,
) -> None:
    f = await fakes(("claude", "anthropic"),)
    creds = tmp_path / "credentials.json"
    write_credentials(creds, "tok-old", refresh="refresh-1")
    f["claude"].faults.valid_tokens = {"tok-old"}
    async with FakeTokenServer() as tokens:
        tokens.set_next("tok-fresh", "refresh-2", expires_in=3600)
        world = FleetWorld(redis, f, tmp_path,
                           profiles=oauth_profile(f["claude"], creds, tokens.token_url))
        try:
            await asyncio.gather(*(world.spawn(n) for n in ("a", "b", "c")))
            await world.wait_for(["a", "b", "c"],
                                 lambda s: len(fleet_of(s)["instances"]) == 3)

            async def ask(name: str) -> httpx.Response:
                return await world.http.post(world.instances[name].url + "/v1/messages",
                                             json=anthropic_body())

            for name in ("a", "b", "c"):  # each has read tok-old and uses it
                assert (await ask(name)).status_code == 200
            f["claude"].faults.valid_tokens = {"tok-fresh"}  # the old token is revoked
            before = len(f["claude"].requests)
            answers = await asyncio.gather(*(ask(n) for n in ("a", "b", "c") for _ in range(3)))
            assert [r.status_code for r in answers] == [200] * 9, [r.text for r in answers]
            assert tokens.call_count == 1  # refresh-1 spent once, by one instance
            doc = json.loads(creds.read_text())
            assert doc["claudeAiOauth"]["refreshToken"] == "refresh-2"
            # Each answer's last try carried the fresh token; a try that went out with the old
            # one (an instance that had not heard of the refresh yet, however late) got its 401
            # and was retried. In which order the tries reached the provider is the scheduler's.
            sent = [r.headers["authorization"] for r in f["claude"].requests[before:]]
            assert sent.count("Bearer tok-fresh") == 9, sent
            assert set(sent) <= {"Bearer tok-old", "Bearer tok-fresh"}, sent
        finally:
            await world.close()
