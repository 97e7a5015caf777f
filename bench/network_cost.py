"""A provider behind a local HTTP proxy: claudex beside the bare forwarder behind the same proxy.

Both forward through one Debian tinyproxy on 127.0.0.1 (the corporate proxy of issue 36) to the
bench upstream answering over TLS with a private CA, as a real provider answers over https: the
forwarder with aiohttp's own `proxy=` and the CA trusted, claudex with `[network]`'s
`upstream_proxy` and `ca_bundle`. Each opens CONNECT tunnels that its pool keeps, so the proxy
relays bytes and what claudex adds through it is its own work. (A plain-http upstream would not
do: tinyproxy 1.11 closes the client's connection after every forwarded answer while answering
HTTP/1.1 without `Connection: close`, and a pooled connection reused at that moment fails.)

Rows: the usual direct rows (plain http: the bench client speaks no TLS) for context, and the two
through the proxy. The route is resolved when the config loads; nothing about it is decided per
request, so claudex's difference to the forwarder should be the same through the proxy as direct.

    run by `make bench` as the "network" section
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


def _proxied_config(world: World, proxy_port: int, port: int, upstream: str, ca: Path) -> Path:
    """The bench's main config, its served profile at the TLS upstream, every profile routed
    through the proxy."""
    text = main_config(world.ports, world.refusing_port, port)
    text = text.replace(f'base_url = "http://127.0.0.1:{world.ports.upstream}"',
                        f'base_url = "{upstream}"', 1)
    text = text.replace("[health]", f'[network]\nupstream_proxy = "http://127.0.0.1:{proxy_port}"'
                                    f'\nca_bundle = "{ca}"\n\n[health]', 1)
    path = world.workdir / "bench-proxied.toml"
    path.write_text(text)
    return path


def measure(world: World, latency_n: int, seconds: int, wrk_bin: str | None) -> dict[str, Any]:
    """Latency (one request at a time) and throughput (wrk, 64 connections) of the forwarder and
    claudex, each direct and through the proxy."""
    from claudex.demo.pki import new_authority
    from claudex.demo.world import free_port

    proxy_port, tls_port = free_port(), free_port()
    reference_port, claudex_port = free_port(), free_port()
    up = world.ports.upstream
    pki = world.workdir / "pki"
    authority = new_authority(pki, "claudex bench CA")
    server = authority.issue_server(pki, "upstream")
    tls_upstream = f"https://127.0.0.1:{tls_port}"
    started: list[procs.Proc] = [_tinyproxy(world, proxy_port)]
    try:
        started.append(world.fleet.start(
            "upstream-tls", procs.python("-m", "bench.upstream", str(tls_port),
                                         str(server.cert), str(server.key)),
            under_test=False, port=tls_port))
        started.append(world.fleet.start(
            "reference-via-proxy",
            procs.python("-m", "bench.reference_proxy", "--port", str(reference_port),
                         "--upstream", tls_upstream, "--ca", str(authority.cert_path),
                         "--proxy", f"http://127.0.0.1:{proxy_port}"),
            under_test=True, port=reference_port,
            ready=lambda: http_ok(reference_port, "POST", "/v1/messages", messages_body())))
        config = _proxied_config(world, proxy_port, claudex_port, tls_upstream,
                                 authority.cert_path)
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
                 for name in ("reference", "claudex")}
        out: dict[str, Any] = {
            "latency_ms": ms, "added_p50_ms": added,
            "added_p50_ratio": round(added["claudex"] / added["reference"], 3),
            # No direct TLS row to subtract (the bench client speaks no TLS): claudex's p50 over
            # the forwarder's, through the proxy and direct, in ms.
            "claudex_minus_forwarder_p50_ms": round(ms["claudex"]["p50"]
                                                    - ms["reference"]["p50"], 4),
            "claudex_minus_forwarder_p50_ms_via_proxy": round(
                ms["claudex_via_proxy"]["p50"] - ms["reference_via_proxy"]["p50"], 4),
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


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def lines(section: dict[str, Any]) -> list[str]:
    ms, added = section["latency_ms"], section["added_p50_ms"]
    rows = [f"{'':22} {'p50 ms':>8} {'added p50':>10} {'rps @64':>9}"]
    rps = section.get("rps_64", {})
    for name in ("direct", "reference", "claudex", "reference_via_proxy", "claudex_via_proxy"):
        rows.append(f"{name:22} {ms[name]['p50']:>8.3f} "
                    f"{_ms(added.get(name)):>10} {rps.get(name, float('nan')):>9.1f}")
    rows.append(f"claudex over the forwarder, p50: direct "
                f"+{section['claudex_minus_forwarder_p50_ms']:.3f} ms (added p50 "
                f"{section['added_p50_ratio']}x the forwarder's), through the proxy over TLS "
                f"+{section['claudex_minus_forwarder_p50_ms_via_proxy']:.3f} ms")
    if "throughput_ratio" in section:
        rows.append(f"claudex / forwarder, throughput: direct {section['throughput_ratio']}x, "
                    f"through the proxy {section['throughput_ratio_via_proxy']}x")
    return rows
