"""A committed stream that breaks is told as failed (issue 23, item 7): the client got an SSE
error event after a 200, so the request line, the request event and the journal row say the
stream failed instead of an `ok` with a 200 — through a real `claudex serve`."""

from __future__ import annotations

import asyncio
import signal
from pathlib import Path
from typing import Any

import httpx

from claudex.console.format import record_row
from tests.cli.test_cli import spawn_serve, wait_until_serving
from tests.conftest import anthropic_body, primary_backup_config


async def test_a_stream_broken_after_its_commit_is_reported_failed(fakes: Any,
                                                                  tmp_path: Path) -> None:
    f = await fakes(("primary", "anthropic"), ("backup", "anthropic"))
    f["primary"].set_fault("stream_error", cut_after_events=2)  # content first, then the error
    path, port = primary_backup_config(tmp_path, f)
    proc = await spawn_serve(path, "--debug")
    url = f"http://127.0.0.1:{port}"
    try:
        await wait_until_serving(url, proc)
        async with httpx.AsyncClient(base_url=url, timeout=10.0) as client:
            resp = await client.post("/proxy/primary/v1/messages",
                                     json=anthropic_body(stream=True),
                                     headers={"anthropic-version": "2023-06-01"})
            assert resp.status_code == 200
            assert "event: error" in resp.text  # what the client saw
            f["primary"].set_fault("ok")
            ok = await client.post("/proxy/primary/v1/messages", json=anthropic_body(stream=True),
                                   headers={"anthropic-version": "2023-06-01"})
            assert "event: error" not in ok.text
            rows = (await client.get("/_claudex/history")).json()["requests"]
            failed = (await client.get("/_claudex/history",
                                       params={"outcome": "failed"})).json()["requests"]
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = await asyncio.wait_for(proc.communicate(), 20)

    broken, fine = sorted(rows, key=lambda row: row["time"])
    assert (broken["status"], broken["outcome"]) == (200, "failed")
    assert (fine["status"], fine["outcome"]) == (200, "ok")
    assert [row["request_id"] for row in failed] == [broken["request_id"]]
    row = record_row(broken, lambda epoch: "12:00:00")
    assert row.outcome == "failed" and row.broke and row.trail == "primary stream_error"
    lines = [line for line in err.decode().splitlines() if "request anthropic" in line]
    assert any("-> primary 200 stream failed [primary stream_error]" in line
               for line in lines), lines
    assert any("-> primary 200 [primary 200]" in line for line in lines), lines
