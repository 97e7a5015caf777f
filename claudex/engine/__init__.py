"""The engine: pure logic and asyncio, no server, console or Textual.

    engine.py       the Engine: owns the providers' runtimes, serves requests, status snapshot
    clock.py        the clock seam: monotonic and wall time and sleep, injected everywhere
    events.py       the event bus: every package's news, fanned out to the console, SSE, logs
    control_http.py the control plane's HTTP client (probes, token refresh)
    core/           the forwarding core: one request along its chain (policy, classify, failover,
                    retries, exchange, streams, claudex's own limits, the transport)
    addons/         features on the request lifecycle: statistics, latency windows, the request
                    report, signature memory (each an addon the core calls at its hooks)
    breaker/        the circuit breaker: its state machine as a table, the runtime object, trips
    credentials/    upstream credentials: token sources, OAuth refresh, the wire form of a token
    health/         judged off the request path: probes, the slow watch and its judge, the
                    spent-window watch
    masking/        what is never shown in full: the secret scrubber, the header allow-list, the
                    log's redaction filter
    routing/        [routes] and [router]: what a request is, and which profile serves it
    fleet/          instances sharing facts through Redis
    history/        the SQLite journal: writing, querying, seeding counters at start

The clock, the event bus and the control client stay beside engine.py: the Engine makes them
and hands them to every package, so none of the packages is their home.
"""
