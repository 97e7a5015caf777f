"""What a request to Claude on Bedrock or Vertex costs claudex (issue 37), in-process and without
sockets, beside a DirectAnthropic pass-through of the same request:

    python -m bench.cloud_cost [--requests 4000] [--json]

- CPU µs and claudex's own function calls per non-streamed request through the server's ASGI
  app to a transport answering from memory (bench/request_cost.py's harness), for profiles
  `anth` (DirectAnthropic, the pass-through), `bedrock-key` (Bedrock with a Bedrock API key:
  the body rewrite, no signature), `bedrock-sigv4` (Bedrock signed SigV4 with keys from the
  environment: the body rewrite and the signature) and `vertex` (a token_command's token: the
  body rewrite);
- SigV4 alone: µs to sign one request with botocore (`sign_request`);
- the stream: CPU µs per streamed answer of 60 events through Bedrock's decoder in front of
  the Anthropic relay (`EventStreamCodec`), beside the same answer as SSE through the relay
  alone, the bytes arriving a few frames at a time as a socket delivers them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.request_cost import ANTHROPIC_ANSWER, claudex_calls, cpu_us, runner
from claudex.config.loader import parse_config
from claudex.engine.engine import Engine
from claudex.engine.history.journal import Journal

CONFIG = """
[proxy]
default_profile = "{profile}"

[health]
enabled = false

[[profiles]]
name = "anth"
provider_type = "DirectAnthropic"
base_url = "http://127.0.0.1:9"
api_key = "sk-bench-not-a-secret-0000"

[[profiles]]
name = "bedrock-key"
provider_type = "Bedrock"
region = "us-east-1"
base_url = "http://127.0.0.1:9"
api_key = "bedrock-bench-not-a-secret-0000"
default_model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"

[[profiles]]
name = "bedrock-sigv4"
provider_type = "Bedrock"
region = "us-east-1"
base_url = "http://127.0.0.1:9"
auth_type = "aws-sigv4"
default_model = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"

[[profiles]]
name = "vertex"
provider_type = "Vertex"
region = "us-east5"
project = "bench"
base_url = "http://127.0.0.1:9/v1"
token_command = "printf ya29.bench-not-a-secret-00000000"
default_model = "claude-sonnet-4-5@20250929"
"""
PROFILES = ("anth", "bedrock-key", "bedrock-sigv4", "vertex")
_KEYS = {"AWS_ACCESS_KEY_ID": "AKIDBENCHNOTASECRET0", "AWS_SECRET_ACCESS_KEY":
         "bench-not-a-secret-0000000000000000000000", "AWS_EC2_METADATA_DISABLED": "true"}


class _Memory:
    """Every provider answers the Anthropic message at once (Bedrock and Vertex answer a whole
    request in the Anthropic API's JSON)."""

    async def send(self, provider: str, method: str, url: str, headers: Any, body: Any, *,
                   connect_timeout: float, read_timeout: float | None) -> Any:
        from bench.request_cost import _ANSWER_HEADERS, _Answer

        return _Answer(ANTHROPIC_ANSWER, _ANSWER_HEADERS)

    async def close(self) -> None:
        pass


def _engine(profile: str, state: Path) -> Engine:
    config = parse_config(CONFIG.format(profile=profile), "bench.toml", env={})
    return Engine(config, transport=_Memory(), journal=Journal(state / f"h-{profile}.sqlite3"))


async def _requests(count: int, reps: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="claudex-bench-clouds-") as state:
        for name in PROFILES:
            engine = _engine(name, Path(state))
            await engine.start(health=False)
            try:
                run = runner(engine)
                await run(300)  # warm-up: keys resolved, the token command run, caches filled
                per = min([await cpu_us(run, count) for _ in range(reps)])
                out[name] = {"cpu_us": round(per, 1)}
            finally:
                await engine.close()
    return out


def _calls(count: int = 200) -> dict[str, float]:
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="claudex-calls-clouds-") as state:
        for name in PROFILES:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            try:
                engine = _engine(name, Path(state))
                loop.run_until_complete(engine.start(health=False))
                if engine.seeding is not None:
                    loop.run_until_complete(engine.seeding)
                run = runner(engine, flush=False)
                loop.run_until_complete(run(50))
                out[name] = round(claudex_calls(run, count)[0], 1)
                loop.run_until_complete(engine.close())
            finally:
                asyncio.set_event_loop(None)
                loop.close()
    return out


def _signing_us(count: int) -> float:
    from claudex.engine.credentials.aws_sigv4 import AwsCredentials, sign_request

    keys = AwsCredentials(_KEYS["AWS_ACCESS_KEY_ID"], _KEYS["AWS_SECRET_ACCESS_KEY"])
    body = b'{"anthropic_version":"bedrock-2023-05-31","max_tokens":256,"messages":[]}' * 20
    headers = {"content-type": "application/json", "accept": "application/json",
               "user-agent": "claudex/bench"}
    url = "https://bedrock-runtime.us-east-1.amazonaws.com/model/x/invoke"
    started = time.process_time()
    for _ in range(count):
        sign_request(keys, service="bedrock", region="us-east-1", method="POST", url=url,
                     headers=headers, body=body)
    return (time.process_time() - started) / count * 1e6


def _stream_parts(events: int) -> tuple[list[bytes], list[bytes]]:
    """One streamed answer of `events` text deltas, as SSE and as Bedrock's frames, in the
    pieces a socket hands over (four events a read)."""
    from claudex.providers.bedrock import chunk_frame

    datas = [json.dumps({"type": "message_start", "message": {
        "id": "msg_b", "type": "message", "role": "assistant", "model": "claude", "content": [],
        "usage": {"input_tokens": 12, "output_tokens": 1}}}),
             json.dumps({"type": "content_block_start", "index": 0,
                         "content_block": {"type": "text", "text": ""}})]
    datas += [json.dumps({"type": "content_block_delta", "index": 0,
                          "delta": {"type": "text_delta", "text": f"word{i} "}})
              for i in range(events)]
    datas += [json.dumps({"type": "content_block_stop", "index": 0}),
              json.dumps({"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                          "usage": {"output_tokens": events}}),
              json.dumps({"type": "message_stop"})]
    datas = [json.dumps(json.loads(d), separators=(",", ":")) for d in datas]  # as on the wire
    sse = [f"event: {json.loads(d)['type']}\ndata: {d}\n\n".encode() for d in datas]
    frames = [chunk_frame(d.encode(), padding=1 + i % 40) for i, d in enumerate(datas)]

    def pieces(items: list[bytes]) -> list[bytes]:
        return [b"".join(items[i:i + 4]) for i in range(0, len(items), 4)]

    return pieces(sse), pieces(frames)


def _stream_us(answers: int, events: int = 60) -> dict[str, float]:
    from claudex.engine.clouds.bedrock import EventStreamCodec
    from claudex.engine.core.stream_codec import Relay
    from claudex.providers import anthropic

    sse, frames = _stream_parts(events)

    def one(pieces: list[bytes], wrap: bool) -> None:
        relay = Relay(anthropic.tail_scanner())
        codec = EventStreamCodec(relay) if wrap else relay
        for piece in pieces:
            codec.feed(piece)
        assert codec.finished
        codec.finish()

    def timed(pieces: list[bytes], wrap: bool) -> float:
        started = time.process_time()
        for _ in range(answers):
            one(pieces, wrap)
        return (time.process_time() - started) / answers * 1e6

    relay = statistics.median(timed(sse, False) for _ in range(3))
    bedrock = statistics.median(timed(frames, True) for _ in range(3))
    return {"events": events, "relay_us": round(relay, 1), "bedrock_us": round(bedrock, 1),
            "per_event_us": round((bedrock - relay) / (events + 5), 2)}


def measure(count: int) -> dict[str, Any]:
    os.environ.update(_KEYS)  # the AWS chain of the SigV4 profile reads them
    import uvloop

    out: dict[str, Any] = {"requests": uvloop.run(_requests(count, 3)), "calls": _calls(),
                           "sigv4_sign_us": round(_signing_us(2000), 1),
                           "stream": _stream_us(400)}
    return out


def lines(section: dict[str, Any]) -> list[str]:
    requests, calls = section["requests"], section["calls"]
    base = requests["anth"]["cpu_us"]
    out = [f"{'profile':<15}{'CPU µs':>9}{'added':>9}{'calls':>8}"]
    for name in PROFILES:
        cpu = requests[name]["cpu_us"]
        out.append(f"{name:<15}{cpu:>9.1f}{cpu - base:>+9.1f}{calls[name]:>8.1f}")
    stream = section["stream"]
    out.append(f"SigV4 signature alone (botocore): {section['sigv4_sign_us']:.1f} µs")
    out.append(f"a streamed answer of {stream['events']} deltas: {stream['relay_us']:.1f} µs "
               f"as SSE through the relay, {stream['bedrock_us']:.1f} µs as Bedrock's "
               f"eventstream decoded in front of it ({stream['per_event_us']:.2f} µs an event)")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.cloud_cost")
    parser.add_argument("--requests", type=int, default=4000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    section = measure(args.requests)
    print(json.dumps(section) if args.json else "\n".join(lines(section)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
