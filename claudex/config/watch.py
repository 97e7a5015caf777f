"""Hot reload: watch the config file and hand each new valid `Config` to the caller.

`ConfigWatcher` runs one asyncio task around `watchfiles.awatch`. It watches the file's
*directory*, not the file, because editors save by writing a temp file and renaming it over the
original, which a watch on the old file would not see. Events for other names are filtered out,
watchfiles coalesces bursts (`debounce_ms`), and then the file is re-read:

- same bytes as last time (sha256): nothing happens. This is how claudex's own writes are
  ignored: the writer calls `acknowledge(digest)` after applying what it wrote.
- loads (`load_config`, the validator of `claudex check`): `on_change(config)`.
- does not load: `on_error(error)`; the caller keeps the previous config live.

Once the watch is set up, the file is compared with `initial_digest` (what the caller loaded),
which catches a change made in between; after that, every `tick_ms` the file's stat is compared
with the last read, which catches any event a platform drops. Callbacks may be plain functions
or coroutines; an exception in one is logged, never fatal.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import os
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import TypeVar

from watchfiles import Change, awatch

from claudex.config.digest import digest_of
from claudex.config.loader import load_config
from claudex.config.model import Config, ConfigError

log = logging.getLogger(__name__)

OnChange = Callable[[Config], Awaitable[None] | None]
OnError = Callable[[ConfigError], Awaitable[None] | None]

# What stat reports about a file, enough to notice it was rewritten; None when it is missing.
_Stat = tuple[int, int, int] | None
_MISSING = "missing"
_T = TypeVar("_T")


class ConfigWatcher:
    """Reloads the config at `path` when it changes on disk; see the module docstring."""

    def __init__(
        self,
        path: Path | str,
        on_change: OnChange,
        on_error: OnError,
        *,
        debounce_ms: int = 300,
        tick_ms: int = 2000,
        initial_digest: str | None = None,
        env: Mapping[str, str] | None = None,
        force_polling: bool | None = None,
    ) -> None:
        """`initial_digest` is the sha256 of the text the caller loaded (default: the file now)."""
        self.path = Path(path)
        self._on_change = on_change
        self._on_error = on_error
        self._debounce_ms = debounce_ms
        self._tick_ms = tick_ms
        self._env = env
        self._force_polling = force_polling
        self._last_digest = initial_digest
        self._last_stat: _Stat = None
        self._task: asyncio.Task[None] | None = None
        self._stop = asyncio.Event()
        self._ready = asyncio.Event()
        self._lock = asyncio.Lock()

    @property
    def last_digest(self) -> str | None:
        """The sha256 of the content last handled (applied, reported or acknowledged)."""
        return self._last_digest

    @property
    def running(self) -> bool:
        return self._task is not None and not self._task.done()

    def acknowledge(self, digest: str) -> None:
        """The caller has written and applied this content itself: do not report it again."""
        self._last_digest = digest

    def start(self) -> None:
        """Start watching (needs a running event loop). Starting twice is a no-op."""
        if self.running:
            return
        if self._last_digest is None:
            self._last_digest = self._read_digest()
        self._last_stat = self._stat()
        self._stop = asyncio.Event()
        self._ready = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name=f"config-watch:{self.path.name}"
        )

    async def wait_ready(self) -> None:
        """Wait until the watch is set up: changes from now on are seen by events."""
        await self._ready.wait()

    async def stop(self) -> None:
        """Stop watching and wait for the task to end."""
        task, self._task = self._task, None
        if task is None:
            return
        # awatch's worker thread checks this event between steps; cancelling alone would wait
        # for its long poll to time out.
        self._stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout=2)
        except TimeoutError:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def check_now(self) -> None:
        """Re-read the file now, as if an event had arrived."""
        async with self._lock:
            await self._check()

    # -----------------------------------------------------------------------------------------

    async def _run(self) -> None:
        names = {self.path.name}
        directories = {self.path.parent.absolute()}
        if self.path.is_symlink():
            # A config linked from a dotfiles checkout: edits happen at the link's target.
            target = self.path.resolve()
            names.add(target.name)
            directories.add(target.parent)

        def relevant(change: Change, changed: str) -> bool:
            return os.path.basename(changed) in names

        try:
            async for changes in awatch(
                *directories,
                watch_filter=relevant,
                debounce=self._debounce_ms,
                step=min(50, self._debounce_ms),
                stop_event=self._stop,
                rust_timeout=self._tick_ms,
                yield_on_timeout=True,
                recursive=False,
                force_polling=self._force_polling,
            ):
                # The first round (the watch is now set up) always compares digests, to catch a
                # change made after the caller loaded the file but before the watch existed.
                first = not self._ready.is_set()
                self._ready.set()
                if first or changes or self._stat() != self._last_stat:
                    async with self._lock:
                        await self._check()
        except Exception:
            # A watch that cannot be set up (directory gone, inotify limit) must not take the
            # console down; the config simply stops reloading.
            log.exception("config watcher stopped: %s", self.path)

    async def _check(self) -> None:
        self._last_stat = self._stat()
        digest = await asyncio.to_thread(self._read_digest)
        if digest == self._last_digest:
            return
        self._last_digest = digest
        try:
            config = await asyncio.to_thread(load_config, self.path, self._env)
        except ConfigError as error:
            log.warning("config not reloaded, %d problem(s) in %s", len(error.issues), self.path)
            await self._call(self._on_error, error)
            return
        log.info("config changed on disk: %s", self.path)
        await self._call(self._on_change, config)

    async def _call(self, callback: Callable[[_T], Awaitable[None] | None], argument: _T) -> None:
        try:
            result = callback(argument)
            if inspect.isawaitable(result):
                await result
        except Exception:
            log.exception("config watcher callback failed")

    def _read_digest(self) -> str:
        try:
            return digest_of(self.path.read_bytes())
        except OSError:
            return _MISSING

    def _stat(self) -> _Stat:
        try:
            info = os.stat(self.path)
        except OSError:
            return None
        return (info.st_mtime_ns, info.st_size, info.st_ino)
