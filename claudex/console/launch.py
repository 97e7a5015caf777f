"""`claudex console` and `claudex demo`: host the engine and the proxy, open the console, and
clean up when it closes. Logs go to a rotating file in the user log dir, never to the terminal
the console owns. The config file is watched: a valid change applies live, an invalid one is
shown in a banner while the previous config stays live."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import platformdirs

from claudex import logs
from claudex.config.model import Config, ConfigError
from claudex.config.watch import ConfigWatcher
from claudex.console.app import ConsoleApp
from claudex.console.hosting import Hosted, HostError, host_config, host_demo
from claudex.console.link import LocalLink
from claudex.console.messages import ConfigRejected, ConfigReloaded
from claudex.server.serve import register_secrets

__all__ = ["HostError", "log_path", "run_console", "run_demo", "watch_config"]


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


def watch_config(path: Path, link: LocalLink, app: ConsoleApp) -> ConfigWatcher:
    """Hot reload: a valid change is applied live, an invalid one shown in the banner."""

    async def applied(config: Config) -> None:
        register_secrets(config)
        await link.apply_config(config)
        app.post_message(ConfigReloaded(len(config.profiles)))

    def rejected(error: ConfigError) -> None:
        app.post_message(ConfigRejected(str(path), [str(issue) for issue in error.issues]))

    return ConfigWatcher(path, applied, rejected)


async def _serve_console(hosted: Hosted, *, read_only: bool) -> int:
    watcher: ConfigWatcher | None = None
    try:
        link = LocalLink(hosted.engine)
        path = hosted.engine.config.path

        async def check_config() -> None:
            if watcher is not None:
                await watcher.check_now()

        app = ConsoleApp(link, read_only=read_only, demo=hosted.controls,
                         config_check=check_config if path is not None else None)
        if path is not None:
            watcher = watch_config(path, link, app)
            watcher.start()
        if hosted.traffic is not None:
            hosted.traffic.start()
        await app.run_async()
        return app.return_code or 0
    finally:
        if watcher is not None:
            await watcher.stop()
        await hosted.close()


def run_console(config: Config, *, read_only: bool = False) -> int:
    """Raises HostError when the proxy cannot start (the port is taken, ...)."""
    setup_logging()

    async def main() -> int:
        return await _serve_console(await host_config(config), read_only=read_only)

    return asyncio.run(main())


def run_demo(*, read_only: bool = False, port: int | None = None) -> int:
    setup_logging()

    async def main() -> int:
        return await _serve_console(await host_demo(port), read_only=read_only)

    return asyncio.run(main())
