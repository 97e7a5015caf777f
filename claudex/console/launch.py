"""`claudex console` and `claudex demo`: attach to an engine that already answers (`claudex
serve`), or host the engine and the proxy on their own thread, open the console on the main one,
and stop the proxy gracefully when the console closes. Logs go to a
rotating file in the user log dir, never to the terminal the console owns. The config file is
watched: a valid change applies live, an invalid one is shown in a banner while the previous
config stays live."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path

import platformdirs

from claudex.config.model import Config, ConfigError
from claudex.config.watch import ConfigWatcher
from claudex.console.app import ConsoleApp
from claudex.console.engine_thread import EngineThread, EngineThreadError
from claudex.console.hosting import Hosted, HostError, host_config, host_demo
from claudex.console.http_link import HttpLink
from claudex.console.link import DemoHooks, EngineLink
from claudex.console.messages import ConfigRejected, ConfigReloaded
from claudex.console.threaded_link import ThreadedLink
from claudex.engine.history.journal import journal_from_settings
from claudex.engine.masking import logs

__all__ = ["HostError", "engine_answers", "log_path", "run_attached", "run_console", "run_demo",
           "run_hosted", "watch_config"]


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


def config_url(config: Config) -> str:
    """Where an engine started from `config` answers."""
    host, port = config.proxy.host, config.proxy.port
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}"


def engine_answers(url: str, headers: Mapping[str, str]) -> bool:
    """Whether a claudex engine answers at `url` (its status route, with the token)."""

    async def ask() -> bool:
        link = HttpLink(url, headers=headers)
        try:
            return await link.connect()
        finally:
            await link.close()

    return asyncio.run(ask())


async def _attached(links: Sequence[HttpLink], read_only: bool) -> int:
    for link in links:
        await link.connect()  # answering or not: the console re-attaches when it does
    try:
        app = ConsoleApp(links[0], read_only=read_only, more_links=links[1:])
        await app.run_async()
        return app.return_code or 0
    finally:
        for link in links:
            await link.close()


def run_attached(urls: Sequence[str], headers: Mapping[str, str], *,
                 read_only: bool = False) -> int:
    """The console on engines that run elsewhere (`claudex serve`), one screen each (`n`
    moves between them); quitting leaves them be."""
    setup_logging()
    return asyncio.run(_attached([HttpLink(u, headers=headers) for u in urls], read_only))


def run_console(config: Config, *, read_only: bool = False,
                urls: Sequence[str] = (), headers: Mapping[str, str] | None = None) -> int:
    """Attach to the engines at `urls` (they need not answer yet), or with no `urls` to one
    answering on the config's address; host one only when none answers there.

    Raises HostError when the proxy cannot start (the port is taken, ...)."""
    headers = dict(headers or {})
    if urls:
        return run_attached(urls, headers, read_only=read_only)
    url = config_url(config)
    if engine_answers(url, headers):
        return run_attached([url], headers, read_only=read_only)
    setup_logging()
    return run_hosted(lambda: host_config(config, journal=journal_from_settings(config.history)),
                      read_only=read_only)


def run_demo(*, read_only: bool = False, port: int | None = None) -> int:
    setup_logging()
    return run_hosted(lambda: host_demo(port), read_only=read_only)
