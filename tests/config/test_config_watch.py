"""Hot reload with the real watcher on real files: valid changes apply, invalid ones are not."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from claudex.config.editing import update_profile
from claudex.config.model import Config, ConfigError
from claudex.config.watch import ConfigWatcher
from tests.paths import EXAMPLE

WAIT = 5.0  # generous upper bound; every wait ends as soon as the callback fires


@dataclass
class Recorder:
    changes: list[Config] = field(default_factory=list)
    errors: list[ConfigError] = field(default_factory=list)
    event: asyncio.Event = field(default_factory=asyncio.Event)

    async def on_change(self, config: Config) -> None:
        self.changes.append(config)
        self.event.set()

    def on_error(self, error: ConfigError) -> None:
        self.errors.append(error)
        self.event.set()

    async def next(self) -> None:
        async with asyncio.timeout(WAIT):
            await self.event.wait()
        self.event.clear()


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "profiles.toml"
    path.write_bytes(EXAMPLE.read_bytes())
    return path


@pytest.fixture
async def watched(config_file: Path) -> AsyncIterator[tuple[ConfigWatcher, Recorder]]:
    recorder = Recorder()
    watcher = ConfigWatcher(
        config_file, recorder.on_change, recorder.on_error, debounce_ms=50, tick_ms=100
    )
    watcher.start()
    async with asyncio.timeout(WAIT):
        await watcher.wait_ready()
    yield watcher, recorder
    await watcher.stop()
    assert not watcher.running


def replaced(path: Path, old: str, new: str) -> str:
    text = path.read_text()
    assert old in text
    return text.replace(old, new)


def edit(path: Path, old: str, new: str) -> None:
    """Rewrite the file in place, as a plain `open(..., "w")` editor would."""
    path.write_text(replaced(path, old, new))


async def test_a_valid_change_calls_on_change_with_the_new_config(
    config_file: Path, watched: tuple[ConfigWatcher, Recorder]
) -> None:
    _, recorder = watched
    edit(config_file, "failure_threshold = 5", "failure_threshold = 7")
    await recorder.next()
    assert recorder.errors == []
    deepseek = recorder.changes[-1].profile("deepseek")
    assert deepseek is not None
    assert deepseek.breaker.failure_threshold == 7
    assert recorder.changes[-1].path == config_file


async def test_an_invalid_change_calls_on_error_only(
    config_file: Path, watched: tuple[ConfigWatcher, Recorder]
) -> None:
    _, recorder = watched
    edit(config_file, 'backup_providers = ["deepseek"]', 'backup_providers = ["nobody"]')
    await recorder.next()
    assert recorder.changes == []
    assert [issue.key for issue in recorder.errors[0].issues] == ["profiles.grok.backup_providers"]

    # Fixing it reloads again.
    edit(config_file, '["nobody"]', '["deepseek"]')
    await recorder.next()
    assert len(recorder.changes) == 1
    assert len(recorder.errors) == 1


async def test_an_atomic_rename_replace_is_seen(
    config_file: Path, watched: tuple[ConfigWatcher, Recorder]
) -> None:
    _, recorder = watched
    temp = config_file.with_name(".profiles.toml.swp")
    temp.write_text(replaced(config_file, "enabled = false", "enabled = true"))
    os.replace(temp, config_file)
    await recorder.next()
    oauth = recorder.changes[-1].profile("claude-oauth")
    assert oauth is not None and oauth.enabled is True


async def test_acknowledged_own_writes_are_ignored(
    config_file: Path, watched: tuple[ConfigWatcher, Recorder]
) -> None:
    watcher, recorder = watched
    written = update_profile(config_file, "grok", {"max_tokens": 10})
    watcher.acknowledge(written.digest)
    # A later external change is still reported, and it is the first report: the own write
    # before it was not.
    edit(config_file, "max_tokens = 10", "max_tokens = 20")
    await recorder.next()
    grok = recorder.changes[0].profile("grok")
    assert grok is not None and grok.max_tokens == 20
    assert len(recorder.changes) == 1


async def test_a_change_before_the_watch_started_is_caught(config_file: Path) -> None:
    recorder = Recorder()
    loaded_digest = "digest of what the caller loaded earlier"
    watcher = ConfigWatcher(
        config_file,
        recorder.on_change,
        recorder.on_error,
        debounce_ms=50,
        tick_ms=100,
        initial_digest=loaded_digest,
    )
    watcher.start()
    try:
        await recorder.next()
    finally:
        await watcher.stop()
    assert len(recorder.changes) == 1
    assert watcher.last_digest != loaded_digest


async def test_a_failing_callback_does_not_stop_the_watcher(config_file: Path) -> None:
    calls: list[Config] = []
    first, second = asyncio.Event(), asyncio.Event()

    def on_change(config: Config) -> None:
        calls.append(config)
        (first if len(calls) == 1 else second).set()
        raise RuntimeError("callback bug")

    watcher = ConfigWatcher(config_file, on_change, lambda _e: None, debounce_ms=50, tick_ms=100)
    watcher.start()
    try:
        await watcher.wait_ready()
        edit(config_file, "port = 13456", "port = 13457")
        # Wait for the first reload before the second edit, so they are not coalesced.
        async with asyncio.timeout(WAIT):
            await first.wait()
        edit(config_file, "port = 13457", "port = 13458")
        async with asyncio.timeout(WAIT):
            await second.wait()
    finally:
        await watcher.stop()
    assert [c.proxy.port for c in calls] == [13457, 13458]
