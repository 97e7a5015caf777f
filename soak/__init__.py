"""Chaos soak for claudex: a real `claudex serve` process in front of three fake providers whose
faults change on a seeded random schedule, driven by many concurrent clients of both protocols.

`python -m soak` (`make soak`) runs the full 20,000-request soak;
`tests/harnesses/test_soak.py` runs a 30-second one in `make test`. Every request must end with
a complete valid answer or one well-formed error in its protocol's format, within its deadline;
no upstream call may follow a committed stream; every breaker transition must be one the
reference model allows; the process's memory must not grow with the traffic once its bounds are
full (soak/memory_check.py) and its open files must be flat at the end. The instances keep their
state (the journal, saved trips) in the soak's scratch folder, never in the user's.
"""
