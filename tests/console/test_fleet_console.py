"""The console's header says when the fleet's Redis does not answer (and nothing otherwise)."""

from __future__ import annotations

from claudex.console.app import ConsoleApp
from claudex.console.link import LocalLink
from claudex.demo.world import free_port
from claudex.engine.engine import Engine
from tests.conftest import TEST_ENV, build_config, eventually
from tests.console.test_console import SIZE, TWO_PROFILES, header_text, settle


async def test_header_says_fleet_redis_unreachable() -> None:
    config = build_config(f'[fleet]\nredis_url = "redis://127.0.0.1:{free_port()}"\n'
                          + TWO_PROFILES)
    engine = Engine(config, env=TEST_ENV)
    await engine.start(health=False)
    try:
        assert engine.fleet is not None
        app = ConsoleApp(LocalLink(engine))
        async with app.run_test(size=SIZE) as pilot:
            await eventually(lambda: engine.fleet is not None
                             and engine.fleet.redis == "unreachable", limit_s=10)
            await settle(app, pilot)
            assert "fleet: redis unreachable" in header_text(app)
    finally:
        await engine.close()


async def test_header_says_nothing_of_a_fleet_without_one() -> None:
    engine = Engine(build_config(TWO_PROFILES), env=TEST_ENV)
    try:
        app = ConsoleApp(LocalLink(engine))
        async with app.run_test(size=SIZE) as pilot:
            await settle(app, pilot)
            assert "fleet" not in header_text(app)
    finally:
        await engine.close()
