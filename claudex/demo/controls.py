"""The console demo's hands on the demo world: fault injection into the fake providers, the
demo's upstream proxy `corp` taken down or made to answer 429, and the traffic switch (implements
`claudex.console.link.DemoHooks` structurally).

Faults are set in-process on the fakes, so they take effect at once: "down" closes the fake's
listening socket, the others change its next answers. The fakes and the traffic generator belong
to one event loop: when the console runs them on the engine's thread, `run_on_world` carries each
change there and waits for it (a sub-millisecond hop); by default it runs it where it is called.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from claudex.demo.fake_provider import FakeProvider
from claudex.demo.fake_proxy import FakeProxy
from claudex.demo.faults import FaultConfigError
from claudex.demo.traffic import TrafficGenerator

# What each demo fault key does, in words the operator sees after pressing it.
FAULT_WORDS: Final[dict[str, str]] = {
    "ok": "answers normally again",
    "down": "is down: connections are refused",
    "500": "answers 500 server errors",
    "429": "rate-limits every request (429, retry after 5 s)",
    "slow": "answers 1.2 s slower: its panel turns yellow within a minute",
    "401": "rejects the API key (401)",
    "spend": "spent its plan's window (it resets in 30 s)",
}

RATE_LIMIT_RETRY_AFTER_S: Final = 5.0
SPENT_WINDOW_S: Final = 30.0  # the demo's "spend" key: the plan's window resets after this
# Slow enough for live traffic to turn the panel yellow (every answer +1.2 s against a few ms
# usually), not so slow that the 2 s health probes fail and turn it red.
SLOW_LATENCY_MS: Final = 1200.0

# The demo proxy's keys toggle: a key sets its mode, the same key again puts the proxy back to ok.
PROXY_MODES: Final[dict[str, str]] = {"down": "down", "429": "rate_limited"}
PROXY_WORDS: Final[dict[str, str]] = {
    "down": "is down: connections refused",
    "rate_limited": "answers 429 to every CONNECT (Retry-After {retry_after} s)",
    "ok": "tunnels again",
}

RunOnWorld = Callable[[Callable[[], Any]], Any]
"""Runs a function on the demo world's event loop (thread) and returns its result."""


def _run_here(func: Callable[[], Any]) -> Any:
    return func()


class DemoControls:
    def __init__(self, fakes: Mapping[str, FakeProvider], traffic: TrafficGenerator,
                 *, proxies: Mapping[str, FakeProxy] | None = None,
                 run_on_world: RunOnWorld = _run_here) -> None:
        self.fakes = dict(fakes)
        self.proxies = dict(proxies or {})
        self.traffic = traffic
        self.run_on_world = run_on_world

    def has_fake(self, name: str) -> bool:
        return name in self.fakes

    def fault_of(self, name: str) -> str | None:
        # A read of one attribute: safe from any thread.
        fake = self.fakes.get(name)
        return None if fake is None else fake.faults.mode

    def inject(self, name: str, mode: str) -> str:
        fake = self.fakes.get(name)
        if fake is None:
            return f"{name} is not one of the demo's fake providers."

        if mode == "spend" and fake.plan is None:
            return f"fake {name} is not a subscription: it has no plan window to spend."

        def set_fault() -> None:
            if mode == "spend" and fake.plan is not None:
                fake.plan.spend(SPENT_WINDOW_S)
            elif mode == "429":
                fake.set_fault("429", retry_after=RATE_LIMIT_RETRY_AFTER_S)
            elif mode == "slow":
                fake.set_fault("slow", latency_ms=SLOW_LATENCY_MS)
            else:
                fake.set_fault(mode)  # type: ignore[arg-type]  # FaultConfigError if unknown

        try:
            self.run_on_world(set_fault)
        except (FaultConfigError, RuntimeError) as exc:  # RuntimeError: the world's loop is gone
            return f"Could not set that fault on {name}: {exc}"
        return f"fake {name} {FAULT_WORDS.get(mode, f'is now in mode {mode}')}"

    def proxy_mode(self) -> str | None:
        """The demo proxy's mode ("ok", "down", "rate_limited"), None without one."""
        proxy = next(iter(self.proxies.values()), None)
        return None if proxy is None else proxy.mode

    def toggle_proxy(self, key: str) -> str:
        """Key "down" or "429": put the demo's upstream proxy in that mode, or back to ok when
        it is in it already."""
        if not self.proxies:
            return "This demo has no upstream proxy."
        name, proxy = next(iter(self.proxies.items()))
        wanted = PROXY_MODES.get(key)
        if wanted is None:
            return f"No proxy mode {key!r}: {', '.join(PROXY_MODES)}."
        mode = "ok" if proxy.mode == wanted else wanted

        def set_mode() -> None:
            proxy.set_mode(mode)  # type: ignore[arg-type]  # one of PROXY_MODES' values or ok
            if mode == "rate_limited":
                # Tunnels already open would carry on unbothered (a 429 answers a CONNECT):
                # dropped, so the next requests meet the 429 at once.
                proxy.drop_connections()

        try:
            self.run_on_world(set_mode)
        except RuntimeError as exc:  # the world's loop is gone
            return f"Could not change upstream proxy {name}: {exc}"
        words = PROXY_WORDS[mode].format(retry_after=proxy.retry_after)
        return f"upstream proxy {name} {words}"

    def toggle_traffic(self) -> bool:
        result: bool = self.run_on_world(self.traffic.toggle)
        return result

    def traffic_text(self) -> str:
        if not self.traffic.running:
            return "traffic off"
        return f"traffic {self.traffic.rate_per_s:g}/s"
