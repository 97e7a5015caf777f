"""`python -m soak.memory`: what the soak's `claudex serve` holds after the warm-up and at the end,
and what grew between — by the kernel's mappings, the allocators' own statistics and (with
`--trace N`) tracemalloc, by file and by traceback.

    python -m soak.memory --seconds 30 --seed 4          # the CI soak's run; RSS as judged
    python -m soak.memory --seconds 30 --seed 4 --trace 12 --top 40

The child is started through soak/child.py and dumps its memory on SIGUSR1 at the soak's two idle
measurements ("warm", "end"). With `--trace` every allocation is traced from the warm dump on, and
the end's snapshot is what was allocated since and is still alive; the child is slower then and
the traces take memory: read RSS from a run without it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import signal
import sys
import tempfile
import tracemalloc
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from soak.child import DUMP_CENSUS, DUMP_COLLECTS, MEMORY_DUMPS, TRACEMALLOC
from soak.memory_check import RssSample
from soak.run import SoakPlan, run_soak
from soak.world import ServeProcess

KB = 1024
MB = 1024 * 1024


# -- /proc/PID/smaps --------------------------------------------------------------------------

_HEADER = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$")


@dataclass(frozen=True)
class Mapping:
    start: int
    size: int
    perms: str
    name: str
    rss: int
    anonymous: int


def mappings(text: str) -> list[Mapping]:
    found: list[Mapping] = []
    current: dict[str, object] | None = None
    for line in text.splitlines():
        head = _HEADER.match(line)
        if head:
            if current is not None:
                found.append(Mapping(**current))  # type: ignore[arg-type]
            start, end = int(head[1], 16), int(head[2], 16)
            current = {"start": start, "size": end - start, "perms": head[3],
                       "name": head[4].strip(), "rss": 0, "anonymous": 0}
        elif current is not None and line.startswith(("Rss:", "Anonymous:")):
            key = "rss" if line.startswith("Rss:") else "anonymous"
            current[key] = int(line.split()[1]) * KB
    if current is not None:
        found.append(Mapping(**current))  # type: ignore[arg-type]
    return found


def kind_of(m: Mapping) -> str:
    """What a mapping is: a file's, the brk heap (glibc's main arena), or anonymous memory
    (pymalloc's 1 MiB arenas, glibc's thread arenas and mallocs over its mmap threshold, thread
    stacks: the kernel merges neighbouring ones into one mapping, so they are told apart by the
    allocators' own statistics, not here)."""
    if m.name.startswith("/"):
        return "file-backed (libraries, the journal's -shm)"
    if m.name == "[heap]":
        return "[heap] (glibc's main arena)"
    if m.name:
        return m.name  # [stack], [vvar], ...
    return "anonymous (pymalloc arenas, thread arenas, big mallocs, stacks)"


def rss_by_kind(text: str) -> dict[str, int]:
    totals: dict[str, int] = defaultdict(int)
    for m in mappings(text):
        totals[kind_of(m)] += m.rss
        if m.name.startswith("/"):
            totals["  file: " + Path(m.name).name] += m.rss
    return dict(totals)


def total_rss(kinds: dict[str, int]) -> int:
    return sum(v for k, v in kinds.items() if not k.startswith("  file:"))


# -- sys._debugmallocstats and malloc_info -------------------------------------------------

def pymalloc_figures(text: str) -> dict[str, int]:
    wanted = {"# arenas allocated current": "arenas", "# bytes in allocated blocks": "in use",
              "# bytes in available blocks": "free blocks", "unused pools": "empty pools",
              "# bytes lost to quantization": "quantization"}
    figures: dict[str, int] = {}
    for line in text.splitlines():
        for marker, name in wanted.items():
            if marker in line and name not in figures:
                figures[name] = int(line.rsplit("=", 1)[1].replace(",", ""))
    figures["arenas"] = figures.get("arenas", 0) * MB  # none while tracemalloc hooks it
    for name in wanted.values():
        figures.setdefault(name, 0)
    return figures


def malloc_figures(xml: str) -> dict[str, int]:
    """glibc's own totals: the system memory of every arena, what is free in them, mmapped."""
    tail = xml[xml.rfind("</heap>"):]
    figures: dict[str, int] = {}
    for kind, name in (("fast", "free (fastbins)"), ("rest", "free (bins)"), ("mmap", "mmap")):
        found = re.search(rf'<total type="{kind}" count="\d+" size="(\d+)"/>', tail)
        if found:
            figures[name] = int(found[1])
    found = re.search(r'<system type="current" size="(\d+)"/>', tail)
    if found:
        figures["arenas' system memory"] = int(found[1])
    figures["arenas"] = xml.count("<heap nr=")
    return figures


# -- the run ---------------------------------------------------------------------------------

async def _dump(serve: ServeProcess, folder: Path, n: int) -> None:
    serve.proc.send_signal(signal.SIGUSR1)
    done = folder / f"{n}.done"
    for _ in range(1200):  # bounded: a traced snapshot of a big heap takes a few seconds
        if done.exists():
            return
        await asyncio.sleep(0.05)
    raise RuntimeError(f"the child wrote no memory dump {n} in 60 s")


def _table(rows: Iterator[tuple[str, int, int]], unit: int = KB, label: str = "KiB") -> None:
    print(f"{'':<52} {'warm':>10} {'end':>10} {'grew':>10}  ({label})")
    for name, warm, end in rows:
        print(f"{name[:52]:<52} {warm / unit:>10,.0f} {end / unit:>10,.0f} "
              f"{(end - warm) / unit:>+10,.0f}")


def _pairs(warm: dict[str, int], end: dict[str, int]) -> Iterator[tuple[str, int, int]]:
    names = sorted(set(warm) | set(end), key=lambda k: -(end.get(k, 0) - warm.get(k, 0)))
    for name in names:
        yield name, warm.get(name, 0), end.get(name, 0)


def dumps_in(folder: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in folder.glob("*.done"))


def dump_line(folder: Path, n: int) -> str:
    """One dump's figures on one line."""
    pym = pymalloc_figures((folder / f"{n}.pymalloc.txt").read_text())
    rss = total_rss(rss_by_kind((folder / f"{n}.smaps").read_text()))
    gc_facts = json.loads((folder / f"{n}.gc.json").read_text())
    line = (f"dump {n:>2}: RSS {rss / MB:6.1f} MB  pymalloc arenas {pym['arenas'] / MB:5.1f} MB, "
            f"in use {pym['in use'] / MB:5.1f}, free blocks {pym['free blocks'] / MB:5.1f}  "
            f"gc counts {gc_facts['count']}, objects {gc_facts['objects']:,}, full collections "
            f"{gc_facts['stats'][2]['collections']}")
    if gc_facts.get("traced"):
        line += f"  traced {gc_facts['traced'][0] / MB:.1f} (peak {gc_facts['traced'][1] / MB:.1f})"
    if "collected" in gc_facts:
        line += f"  a full collection freed {gc_facts['collected']:,} objects"
        if "freed_traced" in gc_facts:
            line += f", {gc_facts['freed_traced'] / MB:.2f} MB"
    return line


def _census(folder: Path, first: int, last: int, top: int) -> None:
    held = [json.loads((folder / f"{n}.held.json").read_text()) for n in (first, last)]
    print("\nthe largest containers at the end (what they reach), and at warm")
    before = {(c["holder"], c["type"]): c for c in held[0]["containers"]}
    for c in held[1]["containers"][:top]:
        w = before.get((c["holder"], c["type"]))
        then = f"{w['items']:>7,} items {w['bytes'] / KB:>8,.0f} KiB" if w else "(not listed)"
        print(f"{c['holder'][:44]:<44} {c['type'][:12]:<12} {c['items']:>7,} items "
              f"{c['bytes'] / KB:>8,.0f} KiB   warm {then}")
    sqlite = [h.get("sqlite", {}) for h in held]
    print(f"SQLite's own memory (sqlite3_memory_used): {sqlite[0].get('used', 0) / KB:,.0f} -> "
          f"{sqlite[1].get('used', 0) / KB:,.0f} KiB (high water "
          f"{sqlite[1].get('highwater', 0) / KB:,.0f})")


def report(folder: Path, top: int) -> None:
    numbers = dumps_in(folder)
    for n in numbers:
        print(dump_line(folder, n))
    for n in numbers:
        garbage = json.loads((folder / f"{n}.gc.json").read_text()).get("garbage")
        if garbage and garbage["objects"]:
            print(f"\ndump {n}'s cyclic garbage: {garbage['objects']:,} objects, "
                  f"{garbage['bytes'] / KB:,.0f} KiB shallow")
            for title in ("type_bytes", "types", "frames", "raised"):
                print(f"  {title}: " + "; ".join(f"{name} {v:,}" for name, v in
                                                   garbage[title][:top]))
            for cycle in json.loads((folder / f"{n}.gc.json").read_text()).get("cycles", []):
                print(f"  cycle: {cycle}")
    first, last = numbers[0], numbers[-1]
    print(f"\nwarm is dump {first}, end is dump {last}")
    if (folder / f"{last}.held.json").exists():
        _census(folder, first, last, top)
    smaps = [rss_by_kind((folder / f"{n}.smaps").read_text()) for n in (first, last)]
    print("\nRSS by mapping (/proc/PID/smaps)")
    _table((name, w, e) for name, w, e in _pairs(*smaps)
           if not name.startswith("  file:") or e != w)
    print(f"{'total':<52} {total_rss(smaps[0]) / KB:>10,.0f} {total_rss(smaps[1]) / KB:>10,.0f}")
    pym = [pymalloc_figures((folder / f"{n}.pymalloc.txt").read_text()) for n in (first, last)]
    print("\npymalloc (sys._debugmallocstats)")
    _table(_pairs(*pym))
    mal = [malloc_figures((folder / f"{n}.malloc_info.xml").read_text()) for n in (first, last)]
    print("\nglibc malloc (malloc_info; 'arenas' is a count)")
    _table((name, w, e) for name, w, e in _pairs(*mal) if name != "arenas")
    print(f"arenas: {mal[0].get('arenas')} -> {mal[1].get('arenas')}")
    traced = [folder / f"{n}.tracemalloc" for n in (first, last)]
    if not traced[1].exists():
        return
    end = tracemalloc.Snapshot.load(str(traced[1]))
    filters = [tracemalloc.Filter(False, tracemalloc.__file__),
               tracemalloc.Filter(False, "<frozen importlib._bootstrap*>")]
    end = end.filter_traces(filters)
    total = sum(s.size for s in end.statistics("filename"))
    print(f"\ntracemalloc (tracing from the warm dump on): {total / KB:,.0f} KiB allocated "
          "since and alive at the end")
    for key in ("filename", "lineno", "traceback"):
        print(f"\nby {key}")
        for stat in end.statistics(key)[:top]:
            print(f"{stat.size / KB:>9,.1f} KiB {stat.count:>8,} blocks  {stat.traceback[0]}")
            if key == "traceback":
                for frame in stat.traceback.format(limit=12)[2::2][:10]:
                    print(f"{'':>32}{frame.strip()}")


def timeline(samples: list[RssSample], every_s: float = 2.0) -> str:
    """RSS through the run, one line every `every_s`."""
    lines, next_at = [], 0.0
    for s in samples:
        if s.at >= next_at:
            lines.append(f"{s.at:7.1f} s  {s.phase:<12} {s.requests:>9,} requests  "
                         f"{s.rss_mb:6.1f} MB")
            next_at = s.at + every_s
    return "\n".join(lines)


async def _run(args: argparse.Namespace, folder: Path) -> None:
    count = 0

    lock = asyncio.Lock()
    periodic: list[asyncio.Task[None]] = []

    async def dump(name: str, serve: ServeProcess) -> None:
        nonlocal count
        async with lock:
            count += 1
            print(f"{name}: RSS {serve.rss_mb():.1f} MB; dump {count} ...", file=sys.stderr)
            await _dump(serve, folder, count)

    async def every(serve: ServeProcess) -> None:
        while True:
            await asyncio.sleep(args.every)
            await dump("during", serve)

    async def on_measure(name: str, serve: ServeProcess) -> None:
        for task in periodic:
            task.cancel()
        await dump(name, serve)
        if name == "warm" and args.every:
            periodic.append(asyncio.create_task(every(serve)))

    instruments = {MEMORY_DUMPS: str(folder)}
    if args.collect:
        instruments[DUMP_COLLECTS] = "1"
    if args.census:
        instruments[DUMP_CENSUS] = "1"
    if args.trace:
        instruments[TRACEMALLOC] = str(args.trace)
    plan = SoakPlan(requests=None if args.seconds else args.requests, seconds=args.seconds,
                    seed=args.seed)
    with tempfile.TemporaryDirectory(prefix="claudex-soak-memory-") as workdir:
        result = await run_soak(plan, Path(workdir), instruments=instruments,
                                on_measure=on_measure,
                                say=lambda text: print(text, file=sys.stderr))
    (folder / "samples.json").write_text(json.dumps([asdict(s) for s in result.rss_samples]))
    print(timeline(result.rss_samples))
    memory = result.memory
    print(f"{result.requests:,} requests ({result.by_phase}); RSS {result.rss_mb[0]:.1f} -> "
          f"{result.rss_mb[1]:.1f} MB; " + (f"slope {memory.slope:+.2f} MB per 10,000 over "
                                           f"{memory.judged_requests:,}" if memory else ""))
    for violation in result.violations[:10]:
        print("violation:", violation)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m soak.memory",
                                     description=(__doc__ or "").split("\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--requests", type=int, default=20_000)
    size.add_argument("--seconds", type=float)
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--trace", type=int, default=0, metavar="FRAMES",
                        help="trace allocations (tracemalloc), FRAMES frames each")
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--every", type=float, default=0.0, metavar="S",
                        help="also dump every S seconds between warm and end")
    parser.add_argument("--census", action="store_true",
                        help="the largest containers and who holds them, at each dump")
    parser.add_argument("--collect", action="store_true",
                        help="a full collection after each dump (what was cyclic garbage)")
    parser.add_argument("--keep", metavar="DIR", help="keep the dumps in DIR")
    parser.add_argument("--report", metavar="DIR", help="only report the dumps kept in DIR")
    args = parser.parse_args(argv)
    if args.report:
        report(Path(args.report), args.top)
        return 0
    if args.keep:
        folder = Path(args.keep)
        folder.mkdir(parents=True, exist_ok=True)
        asyncio.run(_run(args, folder))
        report(folder, args.top)
        return 0
    with tempfile.TemporaryDirectory(prefix="claudex-soak-dumps-") as kept:
        asyncio.run(_run(args, Path(kept)))
        report(Path(kept), args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
