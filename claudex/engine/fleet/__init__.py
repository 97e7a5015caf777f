"""A fleet: claudex instances sharing breaker facts, trips, cooldowns, health leases and OAuth
tokens through Redis (`coordinator.py` ties them together; `facts.py` is the pure merging,
`store.py` the Redis side, `health.py` who probes, `tokens.py` tokens across machines)."""
