"""The circuit breaker (DESIGN.md "Circuit breaker"): the state machine as data (`table.py`), the
runtime object with its clock and callback (`circuit.py`), and timed trips (`trips.py`)."""

from claudex.engine.breaker.circuit import (
    BreakerSnapshot,
    BreakerState,
    CircuitBreaker,
    Permit,
    Transition,
    Trip,
)

__all__ = ["BreakerSnapshot", "BreakerState", "CircuitBreaker", "Permit", "Transition", "Trip"]
