"""The command line against a real `claudex serve` process on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from claudex.demo.world import free_port
from tests.conftest import (
    TEST_ENV,
    anthropic_body,
    eventually,
    primary_backup_config,
)


async def claudex(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "claudex.cli", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **TEST_ENV, **(env or {})},
    )
    out, err = await asyncio.wait_for(proc.communicate(), 30)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def spawn_serve(config: Path, *args: str, env: dict[str, str] | None = None,
                      stdout: int = asyncio.subprocess.PIPE) -> asyncio.subprocess.Process:
    """`claudex serve` on `config` as a child process (stderr piped: read or drain it)."""
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "claudex.cli", "--config", str(config), "serve", *args,
        stdout=stdout, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, **TEST_ENV, **(env or {})},
    )


async def wait_until_serving(url: str, proc: asyncio.subprocess.Process) -> None:
    async with httpx.AsyncClient() as client:
        for _ in range(500):  # bounded: at most ~10 s for the process to start
            if proc.returncode is not None:
                raise AssertionError(f"claudex serve exited with {proc.returncode}")
            try:
                await client.get(url + "/healthz")
                return
            except httpx.TransportError:
                await asyncio.sleep(0.02)
    raise AssertionError("claudex serve did not start")


@pytest.fixture
async def served(fakes: Any, tmp_path: Path) -> AsyncIterator[dict[str, Any]]:
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    path, port = primary_backup_config(tmp_path, f)
    proc = await spawn_serve(path)
    url = f"http://127.0.0.1:{port}"
    try:
        await wait_until_serving(url, proc)
        yield {"url": url, "proc": proc, "fakes": f, "config": path}
    finally:
        if proc.returncode is None:
            proc.send_signal(signal.SIGTERM)
            await asyncio.wait_for(proc.wait(), 20)


async def test_status_trip_reset_against_running_serve(served: dict[str, Any]) -> None:
    url = served["url"]
    served["fakes"]["primary"].set_fault("down")
    async with httpx.AsyncClient(base_url=url) as client:
        for _ in range(3):
            resp = await client.post("/v1/messages", json=anthropic_body())
            assert resp.headers["x-claudex-provider"] == "backup"
    code, out, _ = await claudex("status", "--json", "--url", url)
    assert code == 0
    primary = json.loads(out)["profiles"][0]
    assert primary["breaker"]["state"] == "open" and primary["health"]["color"] == "red"
    code, out, _ = await claudex("status", "--url", url)
    assert code == 0 and "primary" in out and "open" in out
    assert "sk-test-key" not in out
    code, out, _ = await claudex("reset", "primary", "--url", url)
    assert (code, out.strip()) == (0, "primary: reset by operator (breaker closed)")
    code, out, _ = await claudex("trip", "backup", "--url", url)
    assert (code, out.strip()) == (0, "backup: breaker forced_open")
    code, _, err = await claudex("trip", "nobody", "--url", url)
    assert code == 1 and "No profile or upstream proxy named 'nobody'" in err


async def test_status_without_engine_says_how_to_start_one() -> None:
    code, out, err = await claudex("status", "--url", f"http://127.0.0.1:{free_port()}")
    assert code == 1 and "claudex serve" in err and "Traceback" not in err + out


async def test_graceful_shutdown_lets_in_flight_request_finish(served: dict[str, Any]) -> None:
    primary = served["fakes"]["primary"]
    primary.set_fault("slow", latency_ms=600)
    async with httpx.AsyncClient(base_url=served["url"], timeout=10) as client:
        request = asyncio.create_task(client.post("/v1/messages", json=anthropic_body()))
        await eventually(lambda: primary.request_count > 0)  # it reached the provider
        served["proc"].send_signal(signal.SIGTERM)
        resp = await request
    assert resp.status_code == 200 and resp.headers["x-claudex-provider"] == "primary"
    assert await asyncio.wait_for(served["proc"].wait(), 20) == 0


async def test_check_reports_every_problem_with_lines(tmp_path: Path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(
        '[[profiles]]\nname = "a"\nprovider_type = "Nope"\nbase_url = "http://x"\n'
        'backup_providers = ["ghost"]\n'
    )
    code, out, err = await claudex("--config", str(path), "check")
    assert code == 1
    assert f"{path}:3: " in out and "provider_type" in out
    assert f"{path}:5: " in out and "ghost" in out
    assert "Traceback" not in out + err


async def test_check_ok_and_env_and_run(tmp_path: Path) -> None:
    path = tmp_path / "ok.toml"
    path.write_text('[proxy]\nport = 14000\n[[profiles]]\nname = "grok"\n'
                    'provider_type = "OpenAICompatible"\nbase_url = "https://api.x.ai/v1"\n'
                    'api_key_env = "FAKE_KEY"\n')
    code, out, _ = await claudex("--config", str(path), "check")
    assert code == 0 and "grok" in out
    code, out, _ = await claudex("--config", str(path), "env", "grok")
    assert "export ANTHROPIC_BASE_URL='http://127.0.0.1:14000/proxy/grok'" in out
    code, _, err = await claudex("--config", str(path), "env", "nope")
    assert code == 1 and "No profile named 'nope'" in err
    # Claudex's `auto` (its router) is the default route, where routes apply.
    code, out, _ = await claudex("--config", str(path), "env", "auto")
    assert code == 0 and "export ANTHROPIC_BASE_URL='http://127.0.0.1:14000'" in out
    # `run` says how to start the proxy when none answers.
    code, _, err = await claudex("--config", str(path), "run", "grok", "--", "true")
    assert code == 1 and "claudex serve" in err


async def test_run_passes_proxy_env_to_the_command(served: dict[str, Any]) -> None:
    code, out, err = await claudex(
        "--config", str(served["config"]), "run", "backup", "--",
        sys.executable, "-c", "import os; print(os.environ['ANTHROPIC_BASE_URL'])")
    assert code == 0, err
    assert out.strip() == served["url"] + "/proxy/backup"


async def test_run_sets_the_profile_extra_env_and_claudex_claude_binary(
    fakes: Any, tmp_path: Path
) -> None:
    # Anything answering /healthz will do for `run` to go ahead: a fake provider answers 404.
    f = await fakes(("up", "anthropic"))
    port = int(f["up"].base_url.rsplit(":", 1)[1].split("/")[0])
    binary = tmp_path / "fake-claude"
    binary.write_text('#!/bin/sh\necho "binary $RUN_VAR $ANTHROPIC_BASE_URL"\n')
    binary.chmod(0o755)
    path = tmp_path / "p.toml"
    path.write_text(
        f'claude_binary = "{binary}"\n[proxy]\nport = {port}\n'
        '[[profiles]]\nname = "a"\nprovider_type = "DirectAnthropic"\n'
        'base_url = "https://a.test"\nauth_type = "passthrough"\n'
        'extra_env = { RUN_VAR = "from a", "EMPTY_ONE" = "" }\n'
        '[[profiles]]\nname = "b"\nprovider_type = "DirectAnthropic"\n'
        'base_url = "https://b.test"\nauth_type = "passthrough"\n'
        'extra_env = { RUN_VAR = "from b" }\n'
    )
    code, out, err = await claudex("--config", str(path), "run", "b", "--",
                                   "sh", "-c", 'echo "$RUN_VAR"')
    assert (code, out.strip()) == (0, "from b"), err
    # No PROFILE: the default profile's extra_env; no CMD: Claudex's claude_binary.
    code, out, err = await claudex("--config", str(path), "run", env={"RUN_VAR": "outer"})
    assert code == 0, err
    assert out.strip() == f"binary from a http://127.0.0.1:{port}"
    code, out, _ = await claudex("--config", str(path), "run", "a", "--",
                                 "sh", "-c", 'echo "${EMPTY_ONE-unset}"')
    assert (code, out.strip()) == (0, "")


def test_an_engine_refusal_is_said_in_its_own_words_not_as_json() -> None:
    from claudex.cli.common import _engine_error

    said = httpx.Response(409, json={"error": "this engine keeps no history"})
    assert str(_engine_error(said)) == "this engine keeps no history"
    bare = httpx.Response(502, text="<html>bad gateway</html>")
    assert str(_engine_error(bare)) == "The engine answered 502: <html>bad gateway</html>"
