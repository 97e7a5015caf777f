"""`GET /v1/models` through a real `claudex serve` (issue 23, item 7): what a client may ask for
— the profiles' models and their `models` mappings, the aliases, the routes' targets — in the
client's format, the profile this route reaches first."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import httpx

from claudex.demo.world import free_port
from tests.cli.test_cli import spawn_serve, wait_until_serving
from tests.conftest import GLOBALS, profile_toml


async def test_the_list_names_what_a_client_may_ask_for(fakes: Any, tmp_path: Path) -> None:
    f = await fakes(("main", "anthropic"), ("big", "openai"), ("spare", "openai"),
                    ("off", "openai"))
    port = free_port()
    path = tmp_path / "profiles.toml"
    path.write_text(
        GLOBALS.replace("[proxy]", f"[proxy]\nport = {port}")
        + '\n[model_aliases]\nquick = "spare-mini"\n'
        + profile_toml("main", f["main"])
        + profile_toml("spare", f["spare"],
                       extra='models = { haiku = "spare-mini", "gpt-4o" = "spare-chat" }')
        + profile_toml("big", f["big"])
        + profile_toml("off", f["off"], extra="enabled = false")
        + '\n[routes]\nlong_context = "big"\n')
    path.chmod(0o600)
    proc = await spawn_serve(path)
    url = f"http://127.0.0.1:{port}"
    try:
        await wait_until_serving(url, proc)
        async with httpx.AsyncClient(base_url=url, timeout=10.0) as client:
            openai_shape = (await client.get("/v1/models")).json()
            anthropic_shape = (await client.get(
                "/v1/models", headers={"anthropic-version": "2023-06-01"})).json()
            one = (await client.get("/proxy/spare/v1/models")).json()
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.communicate(), 20)

    ids = [m["id"] for m in openai_shape["data"]]
    # The default profile, the route's target, the other enabled ones; then the aliases. The
    # `haiku` key is a pattern: its target is listed, not the word.
    assert ids == ["main-model", "big-model", "spare-model", "spare-mini", "gpt-4o",
                   "spare-chat", "quick"]
    assert openai_shape["object"] == "list"
    assert {m["object"] for m in openai_shape["data"]} == {"model"}
    assert [m["id"] for m in anthropic_shape["data"]] == ids
    assert anthropic_shape["data"][0]["type"] == "model"
    assert (anthropic_shape["first_id"], anthropic_shape["last_id"]) == ("main-model", "quick")
    assert [m["id"] for m in one["data"]] == ["spare-model", "spare-mini", "gpt-4o", "spare-chat",
                                            "quick"]
