"""Traces and cost through a real `claudex serve` (a process of its own, pointed at the
collector by OTEL_EXPORTER_OTLP_ENDPOINT as a user would): a failed-over request's spans as a
receiver on 127.0.0.1 decodes them, its cost in status, the journal and `claudex usage` equal to
genai-prices' own figure for the tokens counted, /metrics' cost counter, and a dead collector
that neither fails nor holds up a request and is one line in the log."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import Any

import httpx
import pytest

from claudex.demo.world import free_port
from tests.cli.test_cli import claudex, spawn_serve, wait_until_serving
from tests.conftest import anthropic_body, eventually, primary_backup_config
from tests.otlp_receiver import Receiver

TRACEPARENT = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def genai_price(tokens: dict[str, int], model: str) -> float:
    from genai_prices import Usage, calc_price

    whole = tokens["input_tokens"] + tokens["cache_read_tokens"] + tokens["cache_write_tokens"]
    return float(calc_price(Usage(input_tokens=whole, output_tokens=tokens["output_tokens"],
                                  cache_read_tokens=tokens["cache_read_tokens"],
                                  cache_write_tokens=tokens["cache_write_tokens"]),
                            model_ref=model).total_price)


async def _stop(proc: asyncio.subprocess.Process) -> str:
    """SIGTERM and the process's stderr (a graceful stop: the engine closes)."""
    if proc.returncode is None:
        proc.send_signal(signal.SIGTERM)
    _, err = await asyncio.wait_for(proc.communicate(), 60)
    return err.decode()


async def test_a_failed_over_request_traced_and_priced(fakes: Any, tmp_path: Path) -> None:
    receiver = await Receiver().start()
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    history = tmp_path / "history.sqlite3"
    # The backup keeps the client's model, a model the price table knows.
    path, port = primary_backup_config(tmp_path, f, extra=f'\n[history]\npath = "{history}"\n')
    path.write_text(path.read_text().replace('default_model = "backup-model"', ""))
    url = f"http://127.0.0.1:{port}"
    proc = await spawn_serve(path, stdout=asyncio.subprocess.DEVNULL,
                             env={"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
                                  "OTEL_SERVICE_NAME": "claudex-under-test"})
    try:
        await wait_until_serving(url, proc)
        f["primary"].set_fault("500")
        async with httpx.AsyncClient(base_url=url, timeout=10.0) as client:
            resp = await client.post("/proxy/primary/v1/messages", json=anthropic_body(),
                                     headers={"anthropic-version": "2023-06-01",
                                              "traceparent": TRACEPARENT})
            assert resp.status_code == 200
            request_id = resp.headers["x-claudex-request-id"]
            await eventually(lambda: any(s.attributes.get("claudex.request_id") == request_id
                                         for s in receiver.spans), 20.0)
            server, clients = receiver.of_request(request_id)
            assert server.kind == "SERVER" and server.attributes["claudex.outcome"] == "failover"
            assert server.trace_id == TRACEPARENT.split("-")[1]
            assert server.parent_span_id == TRACEPARENT.split("-")[2]
            assert server.resource["service.name"] == "claudex-under-test"
            assert [c.attributes["claudex.profile"] for c in clients][-1] == "backup"
            assert clients[0].attributes["error.type"] == "500"
            assert all(c.parent_span_id == server.span_id for c in clients)
            served = clients[-1].attributes
            assert served["gen_ai.response.finish_reasons"] == ["end_turn"]

            status = (await client.get("/_claudex/status")).json()
            backup = next(p for p in status["profiles"] if p["name"] == "backup")
            expected = genai_price(backup["tokens"], "claude-sonnet-4-5")
            assert expected > 0
            assert backup["cost_usd"] == pytest.approx(expected, rel=1e-6)
            assert backup["cost"] == {"priced": 1, "unpriced": 0, "basis": "api"}
            metrics = (await client.get("/metrics")).text
            assert 'claudex_provider_cost_usd_total{provider="backup"}' in metrics
            history_rows = (await client.get("/_claudex/history")).json()["requests"]
            assert history_rows[-1]["cost_usd"] == pytest.approx(expected, rel=1e-6)
            assert history_rows[-1]["cost_basis"] == "api"
        code, out, err = await claudex("--config", str(path), "usage", "--json", "--by",
                                       "profile")
        assert code == 0, err
        report = json.loads(out)
        assert report["total"]["requests"] == 1 and report["total"]["failovers"] == 1
        assert report["total"]["cost_usd"] == pytest.approx(expected, rel=1e-6)
        assert [r["key"] for r in report["rows"]] == ["backup"]
    finally:
        await _stop(proc)
        await receiver.close()


async def test_a_dead_collector_is_one_log_line(fakes: Any, tmp_path: Path) -> None:
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    path, port = primary_backup_config(tmp_path, f)
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    url = f"http://127.0.0.1:{port}"
    proc = await spawn_serve(path, stdout=asyncio.subprocess.DEVNULL,
                             env={"OTEL_EXPORTER_OTLP_ENDPOINT": dead})
    try:
        await wait_until_serving(url, proc)
        async with httpx.AsyncClient(base_url=url, timeout=10.0) as client:
            for _ in range(10):
                resp = await client.post("/proxy/primary/v1/messages", json=anthropic_body(),
                                         headers={"anthropic-version": "2023-06-01"})
                assert resp.status_code == 200
    finally:
        err = await _stop(proc)
    told = [line for line in err.splitlines() if "did not take" in line]
    assert len(told) == 1, err
    assert dead in told[0] and "Traceback" not in err
