"""The engine: pure logic and asyncio, no server, console or Textual.

    engine.py       the Engine: owns the providers' runtimes, serves requests, status snapshot
    core/           the forwarding core: one request along its chain (policy, classify, failover,
                    retries, exchange, streams, claudex's own limits, the transport)
    addons/         features on the request lifecycle: statistics, latency windows, the request
                    report, signature memory (each an addon the core calls at its hooks)
    breaker/        the circuit breaker: its state machine as a table, the runtime object, trips
    credentials/    upstream credentials: token sources, OAuth refresh, the wire form of a token
    fleet/          instances sharing facts through Redis
    history/        the SQLite journal: writing, querying, seeding counters at start
    health.py       background probes
    clock.py, events.py, secrets.py   the clock seam, the event bus, the one secret scrubber
    header_policy.py   which header values are shown and which masked, for every record of them
"""
