"""`claudex serve`: the headless proxy as a process, with graceful shutdown on SIGINT/SIGTERM
(uvicorn stops accepting, lets in-flight requests finish, then the engine closes)."""

from __future__ import annotations

import gc
import logging
import os
from dataclasses import replace
from pathlib import Path

from claudex.config.loader import load_config
from claudex.config.model import Config, ConfigError
from claudex.config.permissions import config_permission_warning
from claudex.config.watch import ConfigWatcher
from claudex.engine.engine import Engine
from claudex.engine.history.journal import journal_from_settings
from claudex.engine.masking.logs import REDACTOR
from claudex.engine.masking.secrets import config_secrets
from claudex.server.app import create_app
from claudex.server.event_stream import EventStreams
from claudex.server.run import bind_socket, make_server
from claudex.server.security import is_loopback_host

log = logging.getLogger("claudex.server")


class ServeError(Exception):
    pass


def resolve_token(config: Config) -> str | None:
    """The local token clients must send, or None. Refuses a non-loopback bind without one."""
    env_name = config.proxy.auth_token_env
    token = os.environ.get(env_name) if env_name else None
    if env_name and not token:
        raise ServeError(f"proxy.auth_token_env names {env_name}, but it is not set.")
    return token


def listen_token(config: Config, host: str) -> str | None:
    """Check that `host` may be used and return the token clients must send (or None).
    Registers the config's secrets with the log redaction. Raises ServeError with the reason."""
    if not is_loopback_host(host) and not config.proxy.auth_token_env:
        raise ServeError(f"Refusing to listen on {host}: a non-loopback address needs "
                         "proxy.auth_token_env so clients must present a token.")
    token = resolve_token(config)
    register_secrets(config)
    return token


def register_secrets(config: Config) -> None:
    """Mask the config's secrets (and the local token) wherever claudex writes text."""
    REDACTOR.add(config_secrets(config))


def listening_on(config: Config, host: str, port: int) -> Config:
    """`config` as served: `--host`/`--port` override the file, so the Host check and the
    status report the address really bound."""
    if (config.proxy.host, config.proxy.port) == (host, port):
        return config
    return replace(config, proxy=replace(config.proxy, host=host, port=port))


def serve_forever(config: Config, *, host: str, port: int, config_path: Path | None) -> int:
    """Serve until a signal. Raises ServeError (one sentence for the user; the command line
    prints it) when the address cannot be served."""
    token = listen_token(config, host)
    try:
        sock = bind_socket(host, port)
    except OSError as exc:
        raise ServeError(f"Cannot listen on {host}:{port}: {exc.strerror}.") from None

    path = config_path
    bound = sock.getsockname()[1]
    config = listening_on(config, host, bound)
    warning = config_permission_warning(config)
    if warning:
        log.warning("%s", warning)
    for issue in config.warnings:  # keys claudex ignores, chain advice: once, at start
        log.warning("%s", issue)

    def reload() -> Config:
        assert path is not None
        fresh = load_config(path)
        register_secrets(fresh)
        return listening_on(fresh, host, bound)

    # The config's models priced by a child process: genai-prices (~13 MB) stays out of the
    # serving process unless an answer comes from a model the config does not name.
    engine = Engine(config, journal=journal_from_settings(config.history), prices_apart=True)

    def changed_on_disk(fresh: Config) -> None:
        fresh = listening_on(fresh, host, bound)
        register_secrets(fresh)
        engine.apply_config(fresh)

    def rejected(error: ConfigError) -> None:
        # The watcher has said how many; the operator needs each one, and that the old config
        # is still the one serving.
        for issue in error.issues:
            log.warning("config not reloaded: %s (the previous config stays live)", issue)

    watcher = ConfigWatcher(path, changed_on_disk, rejected) if path else None
    streams = EventStreams()
    app = create_app(engine, load_config=reload if path else None, token=token,
                     watcher=watcher, event_streams=streams)
    loop_name = "uvloop"
    try:
        import uvloop  # noqa: F401
    except ImportError:
        loop_name = "asyncio"
    server = make_server(app, loop=loop_name, log_level="warning", on_shutdown=streams.close)
    names = ", ".join(p.name for p in config.profiles)
    log.info("claudex listening on http://%s:%d (profiles: %s)", host, bound, names)
    # Startup objects (config, modules, the app) never die: move them out of the collector's
    # sight, and collect the young generation less often. Each request allocates a few hundred
    # short-lived objects; at 64 concurrent requests the default threshold (700) made the
    # collector a measurable share of the proxy's CPU.
    gc.collect()
    gc.freeze()
    gc.set_threshold(20_000, 20, 20)
    server.run(sockets=[sock])
    log.info("claudex stopped")
    return 0


