"""`claudex console` and `claudex demo`: host the engine and the proxy on their own thread, open
the console on the main one, and stop the proxy gracefully when the console closes. Logs go to a
rotating file in the user log dir, never to the terminal the console owns. The config file is
watched: a valid change applies live, an invalid one is shown in a banner while the previous
config stays live."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from pathlib import Path

import platformdirs

from claudex import logs
from claudex.config.model import Config, ConfigError
from claudex.config.watch import ConfigWatcher
from claudex.console.app import ConsoleApp
from claudex.console.engine_thread import EngineThread, EngineThreadError
from claudex.console.hosting import Hosted, HostError, host_config, host_demo
from claudex.console.link import DemoHooks, EngineLink
from claudex.console.messages import ConfigRejected, ConfigReloaded
from claudex.console.threaded_link import ThreadedLink

__all__ = ["HostError", "log_path", "run_console", "run_demo", "run_hosted", "watch_config"]


def log_path() -> Path:
    return platformdirs.user_log_path("claudex") / "claudex.log"


def setup_logging() -> Path:
    path = log_path()
    logs.setup_file(path)
    # Libraries (uvicorn, aiohttp, asyncio) log on their own loggers; their warnings belong in
    # the same file, not on the terminal under the console.
    handlers = logging.getLogger("claudex").handlers
    root = logging.getLogger()
    for handler in handlers:
        if handler not in root.handlers:
            root.addHandler(handler)
    root.setLevel(logging.WARNING)
    return path


def watch_config(path: Path, link: EngineLink, app: ConsoleApp) -> ConfigWatcher:
    """Hot reload: a valid change is applied live, an invalid one shown in the banner."""

    async def applied(config: Config) -> None:
        await link.apply_config(config)  # (which registers its secrets for redaction)
        app.post_message(ConfigReloaded(len(config.profiles)))

    def rejected(error: ConfigError) -> None:
        app.post_message(ConfigRejected(str(path), [str(issue) for issue in error.issues]))

    return ConfigWatcher(path, applied, rejected)


async def _run_app(hosted: Hosted, link: EngineLink, *, read_only: bool,
                   demo: DemoHooks | None) -> int:
    """The console on this thread's loop, with the config watcher; the proxy runs elsewhere."""
    watcher: ConfigWatcher | None = None
    path = hosted.engine.config.path

    async def check_config() -> None:
        if watcher is not None:
            await watcher.check_now()

    app = ConsoleApp(link, read_only=read_only, demo=demo,
                     config_check=check_config if path is not None else None)
    try:
        if path is not None:
            watcher = watch_config(path, link, app)
            watcher.start()
        await app.run_async()
        return app.return_code or 0
    finally:
        if watcher is not None:
            await watcher.stop()


def run_hosted(factory: Callable[[], Awaitable[Hosted]], *, read_only: bool = False) -> int:
    """Host the proxy on its own thread (see engine_thread.py), run the console on this one,
    and stop the proxy gracefully when the console closes.

    Raises HostError when the proxy cannot start (the port is taken, ...)."""
    thread: EngineThread[Hosted] = EngineThread(factory)
    try:
        hosted = thread.start()
    except EngineThreadError as exc:
        raise HostError(str(exc)) from None
    try:
        demo = hosted.controls
        if demo is not None:
            # Traffic stays off until the operator presses `g`, as the README tells a newcomer
            # to do: started here, that key would have turned it off.
            demo.run_on_world = thread.call_and_wait
        link = ThreadedLink(hosted.engine, thread)
        return asyncio.run(_run_app(hosted, link, read_only=read_only, demo=demo))
    finally:
        thread.stop()


def run_console(config: Config, *, read_only: bool = False) -> int:
    """Raises HostError when the proxy cannot start (the port is taken, ...)."""
    setup_logging()
    return run_hosted(lambda: host_config(config), read_only=read_only)


def run_demo(*, read_only: bool = False, port: int | None = None) -> int:
    setup_logging()
    return run_hosted(lambda: host_demo(port), read_only=read_only)
