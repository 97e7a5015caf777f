"""The console demo's hands on the demo world: fault injection into the fake providers and the
traffic switch (implements `claudex.console.link.DemoHooks` structurally).

Faults are set in-process on the fakes (same event loop), so they take effect at once: "down"
closes the fake's listening socket, the others change its next answers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from claudex.demo.fake_provider import FakeProvider
from claudex.demo.faults import FaultConfigError
from claudex.demo.traffic import TrafficGenerator

# What each demo fault key does, in words the operator sees after pressing it.
FAULT_WORDS: Final[dict[str, str]] = {
    "ok": "answers normally again",
    "down": "is down: connections are refused",
    "500": "answers 500 server errors",
    "429": "rate-limits every request (429, retry after 5 s)",
    "slow": "answers after 2.5 s",
    "401": "rejects the API key (401)",
}

RATE_LIMIT_RETRY_AFTER_S: Final = 5.0
SLOW_LATENCY_MS: Final = 2500.0


class DemoControls:
    def __init__(self, fakes: Mapping[str, FakeProvider], traffic: TrafficGenerator) -> None:
        self.fakes = dict(fakes)
        self.traffic = traffic

    def has_fake(self, name: str) -> bool:
        return name in self.fakes

    def fault_of(self, name: str) -> str | None:
        fake = self.fakes.get(name)
        return None if fake is None else fake.faults.mode

    def inject(self, name: str, mode: str) -> str:
        fake = self.fakes.get(name)
        if fake is None:
            return f"{name} is not one of the demo's fake providers."
        try:
            if mode == "429":
                fake.set_fault("429", retry_after=RATE_LIMIT_RETRY_AFTER_S)
            elif mode == "slow":
                fake.set_fault("slow", latency_ms=SLOW_LATENCY_MS)
            else:
                fake.set_fault(mode)  # type: ignore[arg-type]  # FaultConfigError if unknown
        except FaultConfigError as exc:
            return f"Could not set that fault on {name}: {exc}"
        return f"fake {name} {FAULT_WORDS.get(mode, f'is now in mode {mode}')}"

    def toggle_traffic(self) -> bool:
        return self.traffic.toggle()

    def traffic_text(self) -> str:
        if not self.traffic.running:
            return "traffic off"
        return f"traffic {self.traffic.rate_per_s:g}/s"
