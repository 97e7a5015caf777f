"""Whether each provider can serve, judged off the request path: the background probes
(`probes.py`), the watch over slowness (`slow_watch.py`) and its pure judge (`slowness.py`),
and the watch that ends a plan's spent window early when claudex no longer knows it is spent
(`spent_windows.py`). What they find reaches the breaker, the console's colours and the chain's
order; the forwarding core only reads their verdicts."""
