"""Run fake providers in a process of their own until interrupted.

    python -m claudex.demo.serve_fakes grok:openai:9001 claude:anthropic:9002

Each NAME:PROTOCOL[:PORT] starts one `FakeProvider` (port 0 or none: a free one) and prints its
base URL. Faults are switched from outside with `POST /_fake/fault` (see `fake_provider`); a
"down" fault should carry `duration_s`, since nothing can reach a provider while it is down.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import sys
from collections.abc import Sequence

from claudex.demo.fake_provider import FakeProvider, stop_fakes
from claudex.demo.fake_replies import Protocol


def parse_spec(text: str) -> tuple[str, Protocol, int]:
    name, _, rest = text.partition(":")
    protocol, _, port = rest.partition(":")
    if not name or protocol not in ("anthropic", "openai"):
        raise argparse.ArgumentTypeError(f"expected NAME:anthropic|openai[:PORT], got {text!r}")
    if port and not port.isdigit():
        raise argparse.ArgumentTypeError(f"port must be a number in {text!r}")
    return name, protocol, int(port or 0)  # type: ignore[return-value]  # checked above


async def _serve_forever(specs: list[tuple[str, Protocol, int]], host: str) -> None:
    fakes = [FakeProvider(name, protocol, host=host, port=port) for name, protocol, port in specs]
    try:
        for fake in fakes:
            await fake.start()
            print(f"{fake.name:>12}  {fake.protocol:<9}  {fake.base_url}", flush=True)
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError):  # not on Windows
                loop.add_signal_handler(signum, stop.set)
        await stop.wait()
    finally:
        await stop_fakes(fakes)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m claudex.demo.serve_fakes",
        description="Run fake LLM providers until interrupted (faults via POST /_fake/fault).",
    )
    parser.add_argument("specs", nargs="+", type=parse_spec, metavar="NAME:PROTOCOL[:PORT]")
    args = parser.parse_args(argv)
    try:
        # Loopback only: the control routes have no authentication.
        asyncio.run(_serve_forever(args.specs, "127.0.0.1"))
    except KeyboardInterrupt:
        return 0
    except OSError as error:
        print(f"cannot start the fake providers: {error.strerror or error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
