"""A provider behind a local HTTP proxy: claudex beside the bare forwarder behind the same proxy.

Both forward to the bench upstream through one Debian tinyproxy on 127.0.0.1 (the corporate
proxy of issue 36): the forwarder with aiohttp's own `proxy=`, claudex with a profile whose
`upstream_proxy` names that proxy. The same three rows as the latency and throughput sections
(direct to the upstream, forwarder, claudex), each proxied row beside its direct twin, so what a
route costs claudex per request is visible apart from what the proxy itself costs. The route is
resolved when the config loads; nothing about it is decided per request.

    python -m bench.network_cost   (run by `make bench` as the "network" section)
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from bench import procs, wrk
from bench.measure import BenchError, sample
from bench.stats import summary_ms
from bench.world import World, claudex_argv, http_ok, main_config, messages_body

_TINYPROXY_CONF = """\
Port {port}
Listen 127.0.0.1
Timeout 600
MaxClients 1000
LogLevel Critical
Allow 127.0.0.1
DisableViaHeader Yes
"""


def _tinyproxy(world: World, port: int) -> procs.Proc:
    binary = shutil.which("tinyproxy")
    if binary is None:
        raise BenchError("tinyproxy is not installed (Debian's package `tinyproxy`): "
                         "`make test` installs it")
    conf = world.workdir / "tinyproxy.conf"
    conf.write_text(_TINYPROXY_CONF.format(port=port))
    # -d: stay in the foreground, so the fleet owns the process and stops it.
    return world.fleet.start("tinyproxy", [binary, "-d", "-c", str(conf)], under_test=False,
                             port=port)


def _proxied_config(world: World, proxy_port: int, port: int) -> Path:
    """The bench's main config with every profile routed through the proxy."""
    text = main_config(world.ports, world.refusing_port, port)
    text = text.replace("[health]", f'[network]\nupstream_proxy = "http://127.0.0.1:{proxy_port}"'
                                    "\n\n[health]", 1)
    path = world.workdir / "bench-proxied.toml"
    path.write_text(text)
    return path


def measure(world: World, latency_n: int, seconds: int, wrk_bin: str | None) -> dict[str, Any]:
    """Latency (one request at a time) and throughput (wrk, 64 connections) of the forwarder and
    claudex, each direct and through the proxy."""
    from claudex.demo.world import free_port

    proxy_port, reference_port, claudex_port = free_port(), free_port(), free_port()
    up = world.ports.upstream
    started: list[procs.Proc] = [_tinyproxy(world, proxy_port)]
    try:
        started.append(world.fleet.start(
            "reference-via-proxy",
            procs.python("-m", "bench.reference_proxy", "--port", str(reference_port),
                         "--upstream", f"http://127.0.0.1:{up}",
                         "--proxy", f"http://127.0.0.1:{proxy_port}"),
            under_test=True, port=reference_port,
            ready=lambda: http_ok(reference_port, "POST", "/v1/messages", messages_body())))
        config = _proxied_config(world, proxy_port, claudex_port)
        started.append(world.fleet.start(
            "claudex-via-proxy", claudex_argv(config), under_test=True, port=claudex_port,
            env=world.env, ready=lambda: http_ok(claudex_port, "GET", "/healthz"),
            timeout=30.0))
        from bench.sections import _anthropic

        body = messages_body()
        targets = {
            "direct": _anthropic(up, body=body),
            "reference": _anthropic(world.ports.reference, body=body),
            "claudex": _anthropic(world.ports.claudex, body=body),
            "reference_via_proxy": _anthropic(reference_port, body=body),
            "claudex_via_proxy": _anthropic(claudex_port, body=body),
        }
        samples = sample(targets, latency_n)
        ms = {name: summary_ms(values) for name, values in samples.items()}
        added = {name: round(ms[name]["p50"] - ms["direct"]["p50"], 4)
                 for name in targets if name != "direct"}
        out: dict[str, Any] = {
            "latency_ms": ms, "added_p50_ms": added,
            "added_p50_ratio": round(added["claudex"] / added["reference"], 3),
            "added_p50_ratio_via_proxy": round(added["claudex_via_proxy"]
                                               / added["reference_via_proxy"], 3),
        }
        if wrk_bin:
            rps = {}
            for name, port in (("reference", world.ports.reference),
                               ("claudex", world.ports.claudex),
                               ("reference_via_proxy", reference_port),
                               ("claudex_via_proxy", claudex_port)):
                result = wrk.run(wrk_bin, port, "/v1/messages", body, connections=64,
                                 seconds=seconds)
                if result.errors:
                    raise BenchError(f"wrk against {name}: {result.errors} errors of "
                                     f"{result.requests} requests")
                rps[name] = round(result.rps, 1)
            out["rps_64"] = rps
            out["throughput_ratio"] = round(rps["claudex"] / rps["reference"], 3)
            out["throughput_ratio_via_proxy"] = round(rps["claudex_via_proxy"]
                                                      / rps["reference_via_proxy"], 3)
        return out
    finally:
        for proc in reversed(started):
            world.fleet.stop(proc)


def lines(section: dict[str, Any]) -> list[str]:
    ms, added = section["latency_ms"], section["added_p50_ms"]
    rows = [f"{'':22} {'p50 ms':>8} {'added p50':>10} {'rps @64':>9}"]
    rps = section.get("rps_64", {})
    for name in ("direct", "reference", "claudex", "reference_via_proxy", "claudex_via_proxy"):
        rows.append(f"{name:22} {ms[name]['p50']:>8.3f} "
                    f"{added.get(name, 0.0):>10.3f} {rps.get(name, float('nan')):>9.1f}")
    rows.append(f"claudex / forwarder, added p50: direct {section['added_p50_ratio']}x, "
                f"through the proxy {section['added_p50_ratio_via_proxy']}x")
    if "throughput_ratio" in section:
        rows.append(f"claudex / forwarder, throughput: direct {section['throughput_ratio']}x, "
                    f"through the proxy {section['throughput_ratio_via_proxy']}x")
    return rows
