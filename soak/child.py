"""`python -m soak.child ARGS`: `claudex ARGS` (claudex.cli's own `main`) with the soak's opt-in
instruments, each turned on by an environment variable. The soak's world starts its `claudex
serve` through this module only when it asks for an instrument (`World.instruments`); claudex
itself carries none of them, so its request path has no test hook to pay for.

    SOAK_MEMORY_DUMPS=DIR   on SIGUSR1, write what the process's memory holds into DIR (files
                            named N.*, N counting from 1): `N.malloc_info.xml` (glibc's
                            malloc_info(3)), `N.pymalloc.txt` (sys._debugmallocstats),
                            `N.smaps` (/proc/self/smaps), with SOAK_TRACEMALLOC also
                            `N.tracemalloc` (a tracemalloc snapshot), `N.gc.json` (the
                            collector's counts), then `N.done`
    SOAK_DUMP_COLLECTS=1    each dump first makes a full collection and says in `N.gc.json`
                            what it freed: the cyclic garbage held (the dump's other files
                            are from after it, and it changes what later dumps see)
    SOAK_DUMP_CENSUS=1      each dump also writes `N.held.json`: the largest containers, what
                            they reach and who holds them, and SQLite's own memory (the census
                            allocates a few MB while it runs: later dumps' RSS includes that)
    SOAK_TRACEMALLOC=N      trace Python's allocations from the first dump on, N frames each:
                            a later dump's `N.tracemalloc` holds what was allocated since the
                            first and is still alive, i.e. what grew (slower, and the traces
                            take memory of their own: for naming what grows, never in a run
                            whose RSS is judged)
    SOAK_LEAK_BYTES=N       a real leak, for the test of the soak's memory judge: every proxied
                            request (`/proxy/...`) leaves N bytes behind, kept until exit
"""

from __future__ import annotations

import json
import os
import signal
import sys
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from types import FrameType
from typing import Any

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

MEMORY_DUMPS = "SOAK_MEMORY_DUMPS"
TRACEMALLOC = "SOAK_TRACEMALLOC"
LEAK_BYTES = "SOAK_LEAK_BYTES"
DUMP_COLLECTS = "SOAK_DUMP_COLLECTS"
DUMP_CENSUS = "SOAK_DUMP_CENSUS"


def dump_memory(folder: Path, n: int) -> None:
    """Write dump `n` (see the module's docstring); `N.done` is written last."""
    import ctypes
    import tracemalloc

    collector = _collector(tracemalloc.is_tracing(), bool(os.environ.get(DUMP_COLLECTS)))
    libc = ctypes.CDLL(None)
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = (ctypes.c_char_p, ctypes.c_char_p)
    libc.malloc_info.argtypes = (ctypes.c_int, ctypes.c_void_p)
    libc.fclose.argtypes = (ctypes.c_void_p,)
    stream = libc.fopen(str(folder / f"{n}.malloc_info.xml").encode(), b"w")
    if stream:
        libc.malloc_info(0, stream)
        libc.fclose(stream)
    # sys._debugmallocstats writes to the C stderr: point fd 2 at the file meanwhile.
    sys.stderr.flush()
    saved = os.dup(2)
    with open(folder / f"{n}.pymalloc.txt", "wb") as out:
        os.dup2(out.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
    (folder / f"{n}.smaps").write_bytes(Path("/proc/self/smaps").read_bytes())
    if tracemalloc.is_tracing():
        tracemalloc.take_snapshot().dump(str(folder / f"{n}.tracemalloc"))
    (folder / f"{n}.gc.json").write_text(json.dumps(collector))
    if os.environ.get(DUMP_CENSUS):
        (folder / f"{n}.held.json").write_text(json.dumps(_held()))
    frames = os.environ.get(TRACEMALLOC)
    if frames and not tracemalloc.is_tracing():
        tracemalloc.start(int(frames))
    (folder / f"{n}.done").write_text("")


def _collector(tracing: bool, collect: bool) -> dict[str, Any]:
    """The collector's counts and history (`objects`: those it tracks; what `claudex serve` froze
    at start is not among them); with `collect`, then a full collection and what it freed: the
    cyclic garbage the process held (the dump's other files are from after it)."""
    import gc
    import tracemalloc

    before = tracemalloc.get_traced_memory() if tracing else (0, 0)
    facts: dict[str, Any] = {"count": gc.get_count(), "stats": gc.get_stats(),
                             "threshold": gc.get_threshold(), "traced": before,
                             "objects": len(gc.get_objects())}
    if not collect:
        return facts
    gc.set_debug(gc.DEBUG_SAVEALL)  # this collection's garbage is kept, to be described
    try:
        facts["collected"] = gc.collect()
        facts["garbage"] = _described(gc.garbage)
        facts["cycles"] = _cycles(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.collect()  # the garbage kept above is garbage again: free it now
    if tracing:
        facts["freed_traced"] = before[0] - tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
    return facts


def _described(garbage: list[Any]) -> dict[str, Any]:
    """What cyclic garbage is: counts and shallow sizes by type, the code of its frames and
    coroutines, and where its exceptions were raised."""
    from collections import Counter

    types: Counter[str] = Counter()
    sizes: Counter[str] = Counter()
    code: Counter[str] = Counter()
    raised: Counter[str] = Counter()
    for obj in garbage:
        name = type(obj).__qualname__
        types[name] += 1
        sizes[name] += sys.getsizeof(obj)
        frame = getattr(obj, "cr_frame", None) or (obj if name == "frame" else None)
        if frame is not None:
            code[f"{frame.f_code.co_filename}:{frame.f_code.co_qualname}"] += 1
        if isinstance(obj, BaseException):
            tb = obj.__traceback__
            while tb is not None and tb.tb_next is not None:
                tb = tb.tb_next
            where = (f"{tb.tb_frame.f_code.co_filename}:{tb.tb_lineno}"
                     if tb is not None else "no traceback")
            raised[f"{name} at {where}"] += 1
    return {"objects": len(garbage), "bytes": sum(sizes.values()),
            "types": types.most_common(30), "type_bytes": sizes.most_common(30),
            "frames": code.most_common(30), "raised": raised.most_common(30)}


def _held(most: int = 30, at_least: int = 32) -> dict[str, Any]:
    """Who holds the memory: every container of `at_least` items (not a module's or a class's
    namespace), the `most` largest by what they reach (sys.getsizeof summed over the objects
    reachable from them, four references deep, modules, classes and code left out), each with
    its holder's type and attribute; and SQLite's own allocations (sqlite3_memory_used)."""
    import gc

    # `claudex serve` freezes its start-up objects (gc.freeze), and the collector lists none of
    # them: the engine's own structures among them. Seen again for the census; what is alive
    # then is frozen again after it (a census run's later cyclic garbage may outlive it).
    frozen = gc.get_freeze_count()
    gc.unfreeze()
    try:
        return _census(at_least, most)
    finally:
        if frozen:
            gc.freeze()


def _census(at_least: int, most: int) -> dict[str, Any]:
    import ctypes
    import gc
    import types
    from collections import deque

    skip = (types.ModuleType, type, types.FunctionType, types.CodeType, types.BuiltinFunctionType)
    namespaces = {id(vars(obj)) for obj in gc.get_objects()
                  if isinstance(obj, (types.ModuleType, type)) and hasattr(obj, "__dict__")}
    big = [obj for obj in gc.get_objects()
           if isinstance(obj, (dict, list, set, deque, tuple)) and len(obj) >= at_least
           and id(obj) not in namespaces]

    def reached(root: Any, depth: int = 4) -> tuple[int, int]:
        """Sizes summed `depth` references deep (a container, its entries, their fields and
        what those hold): deeper, everything reaches everything."""
        seen = {id(root)}
        todo = [(root, 0)]
        size = 0
        while todo:
            obj, level = todo.pop()
            size += sys.getsizeof(obj)
            if level == depth:
                continue
            for ref in gc.get_referents(obj):
                if id(ref) not in seen and not isinstance(ref, skip):
                    seen.add(id(ref))
                    todo.append((ref, level + 1))
        return size, len(seen)

    sizes = [reached(obj) for obj in big]
    found = []
    for i in sorted(range(len(big)), key=lambda i: -sizes[i][0])[:most]:
        obj = big[i]
        found.append({"holder": _holder(obj, ignore=id(big)), "type": type(obj).__qualname__,
                      "items": len(obj), "bytes": sizes[i][0], "objects": sizes[i][1]})
    del big, obj
    sqlite: dict[str, int] = {}
    try:
        lib = ctypes.CDLL("libsqlite3.so.0")
        lib.sqlite3_memory_used.restype = ctypes.c_int64
        lib.sqlite3_memory_highwater.restype = ctypes.c_int64
        sqlite = {"used": lib.sqlite3_memory_used(), "highwater": lib.sqlite3_memory_highwater(0)}
    except OSError:
        pass
    return {"containers": found, "sqlite": sqlite}


def _holder(obj: Any, ignore: int) -> str:
    """What holds `obj`, in words: `Type.attribute` (an instance's attribute or slot), a module's
    global, or the holder's type (`ignore`: the id of the census' own list)."""
    import gc
    import types

    for ref in gc.get_referrers(obj):
        if isinstance(ref, types.FrameType) or ref is obj or id(ref) == ignore:
            continue
        if isinstance(ref, dict):
            namespace: dict[Any, Any] = ref
            for owner in gc.get_referrers(namespace):
                if getattr(owner, "__dict__", None) is namespace:
                    name = "?"  # a loop, not a generator: one would hold `obj` in a cell
                    for key, value in namespace.items():
                        if value is obj:
                            name = key
                    kind = (owner.__name__ if isinstance(owner, types.ModuleType)
                            else type(owner).__qualname__)
                    return f"{kind}.{name}"
            continue
        return f"{type(ref).__qualname__}{_edge(ref, obj)}"
    return "?"


def _edge(source: Any, target: Any) -> str:
    """How `source` refers to `target`, in words (an attribute, a key, an index)."""
    if isinstance(source, dict):
        for key, value in source.items():
            if value is target:
                return f"[{key!r}]"
        return "[key]"
    if isinstance(source, (list, tuple)):
        for i, value in enumerate(source):
            if value is target:
                return f"[{i}]"
    names = list(getattr(source, "__dict__", {}) or {})
    for cls in type(source).__mro__:
        names += list(getattr(cls, "__slots__", ()))
    for name in names:
        try:
            if getattr(source, name) is target:
                return f".{name}"
        except Exception:
            continue
    if getattr(source, "__dict__", None) is target:
        return ".__dict__"
    for name in ("__self__", "__func__", "cell_contents", "__closure__", "f_back", "cr_frame",
                 "gi_frame", "tb_frame", "tb_next", "__traceback__", "__context__", "__cause__"):
        if getattr(source, name, None) is target:
            return f".{name}"
    return " ->"


def _cycles(garbage: list[Any], per_type: int = 1, most: int = 8) -> list[str]:
    """For the garbage's most numerous classes of objects (not builtins), the shortest cycle
    through one of them: what holds the objects in a cycle, edge by edge."""
    import gc
    from collections import Counter, deque

    ids = {id(obj): obj for obj in garbage}
    counts = Counter(type(obj) for obj in garbage
                     if type(obj).__module__ not in ("builtins",) and
                     not isinstance(obj, type))
    found: list[str] = []
    for cls, _ in counts.most_common(most):
        start = next(obj for obj in garbage if type(obj) is cls)
        parent: dict[int, tuple[int, Any] | None] = {id(start): None}
        queue = deque([start])
        closing = None
        while queue and closing is None:
            node = queue.popleft()
            for ref in gc.get_referents(node):
                if ref is start:
                    closing = node
                    break
                if id(ref) in ids and id(ref) not in parent:
                    parent[id(ref)] = (id(node), node)
                    queue.append(ref)
        if closing is None:
            continue
        path = [closing]
        while (step := parent[id(path[-1])]) is not None:
            path.append(step[1])
        path.reverse()
        words = type(start).__qualname__
        for a, b in zip(path, [*path[1:], start], strict=True):
            words += f"{_edge(a, b)} {type(b).__qualname__}"
        found.append(f"{counts[cls]} x: {words}")
    return found


def _on_usr1(folder: Path) -> Callable[[int, FrameType | None], None]:
    count = 0

    def handler(signum: int, frame: FrameType | None) -> None:
        nonlocal count
        count += 1
        dump_memory(folder, count)

    return handler


def leaking(app: ASGIApp, size: int) -> ASGIApp:
    """`app`, except that every proxied request leaves `size` bytes behind for good (bytes the
    process writes, so they are resident: a zeroed allocation could stay untouched)."""
    kept: list[bytes] = []

    async def leaky(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["path"].startswith("/proxy/"):
            kept.append(b"\x01" * size)
        await app(scope, receive, send)

    return leaky


def _inject_leak(size: int) -> None:
    """Wrap the app claudex hands uvicorn (its public `uvicorn.Config(app, ...)`), so nothing
    of claudex's own is patched."""
    import uvicorn

    original = uvicorn.Config.__init__

    def init(self: uvicorn.Config, app: ASGIApp, *args: Any, **kwargs: Any) -> None:
        original(self, leaking(app, size), *args, **kwargs)

    uvicorn.Config.__init__ = init  # type: ignore[method-assign,assignment]


def main() -> int:
    folder = os.environ.get(MEMORY_DUMPS)
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        signal.signal(signal.SIGUSR1, _on_usr1(Path(folder)))
    leak = os.environ.get(LEAK_BYTES)
    if leak:
        _inject_leak(int(leak))
    from claudex.cli import main as claudex

    return claudex(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
