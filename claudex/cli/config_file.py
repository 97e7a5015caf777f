"""`claudex check` and `claudex init`: the config file, validated and listed, or written from the
logins and API-key variables found (or from a claude-code-router config)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from claudex.cli.common import CliError, _config_path, _no_config, _print_warning
from claudex.config.loader import check_config, load_config
from claudex.config.model import Config
from claudex.config.paths import example_config_path
from claudex.config.permissions import config_permission_warning, file_permission_warning


def cmd_check(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.markup import escape

    path = _config_path(args)
    if not path.exists() and not path.is_symlink():
        raise _no_config(path)
    out = Console(highlight=False)
    issues = check_config(path)
    if issues:
        out.print(f"[bold red]{len(issues)} problem(s)[/] in {path}:")
        for issue in issues:
            out.print(f"  {issue}", markup=False)
        _print_warning(out, file_permission_warning(path))
        return 1
    from rich.table import Table

    config = load_config(path)
    warned = f", {len(config.warnings)} warning(s)" if config.warnings else ""
    pools = f", {len(config.pools)} pool(s)" if config.pools else ""
    out.print(f"[green]ok[/] {path}: {len(config.profiles)} profile(s){pools}{warned}")
    for warning in config.warnings:
        _print_warning(out, str(warning))
    _print_warning(out, config_permission_warning(config))
    table = Table(box=None, show_header=True, header_style="bold", pad_edge=False)
    for column in ("profile", "type", "chain", "state"):
        table.add_column(column, no_wrap=column != "state")
    for p in config.profiles:
        chain = " → ".join([p.name, *p.backup_providers])
        problem = f"[red]misconfigured:[/] {escape(p.problem)}" if p.problem else None
        if not p.enabled:
            state = "[dim]disabled[/]" + (f" ({problem})" if problem else "")
        else:
            state = problem or "[green]ready[/]"
        table.add_row(p.name, _SHORT_TYPES.get(p.provider_type, p.provider_type), chain, state)
    for pool in config.pools:
        members = " | ".join(pool.members)
        chain = " → ".join([f"({members})", *pool.backup_providers])
        table.add_row(pool.name, "pool", chain, f"[green]{pool.balance}[/]")
    out.print(table)
    for line in _routing_lines(config):
        out.print(line, markup=False)
    return 0


def _routing_lines(config: Config) -> list[str]:
    """What `[routes]` and `[router]` do, for `claudex check` (nothing when neither is set)."""
    lines = []
    targets = config.routes.targets()
    if targets:
        shown = ", ".join(f"{route} → {profile}" for route, profile in targets.items())
        tokens = f" (over {config.routes.long_context_tokens:,} tokens)" \
            if "long_context" in targets else ""
        lines.append(f"routes: {shown}{tokens}")
    router = config.router
    if router.active:
        model = f" ({router.model})" if router.model else ""
        rules = ", ".join(f"{name} → {profile}" for name, profile in router.rules.items())
        lines.append(f"router: {router.profile}{model} classifies each conversation: {rules}")
    elif router.rules or router.profile:
        lines.append("router: off (enabled = false)")
    return lines


_SHORT_TYPES = {
    "DirectAnthropic": "anthropic",
    "OpenAICompatible": "openai",
    "OpenAIResponses": "responses",
    "Bedrock": "bedrock",
    "Vertex": "vertex",
}


def cmd_init(args: argparse.Namespace) -> int:
    from claudex.cli.init_network import discover_network, with_network
    from claudex.config.atomic_files import write_text_atomic
    from claudex.config.loader import parse_config
    from claudex.config.starter import discover, report, starter_path_free, starter_text

    path = _config_path(args)
    if not starter_path_free(path):
        raise CliError(
            f"{path} already exists; `claudex init` never replaces a config. Check it with "
            "`claudex check`, or pass --config NEW_FILE to write a starter somewhere else."
        )
    if args.from_ccr:
        return _init_from_ccr(Path(args.from_ccr).expanduser(), path)
    found = discover(os.environ)
    network = discover_network(os.environ)
    text = with_network(starter_text(found, str(example_config_path())), network)
    # What init writes must load; a failure here is claudex's bug, reported before any write.
    config = parse_config(text, str(path))
    try:
        write_text_atomic(path, text, 0o600)
    except OSError as exc:
        raise CliError(f"Cannot write {path}: {exc.strerror or type(exc).__name__}") from None
    print("claudex init looked for logins and API-key variables:")
    for line in report(found):
        print(f"  {line}")
    if network.any:
        print("and for a proxy and certificates ([network]):")
        for line in network.report:
            print(f"  {line}")
    names = ", ".join(p.name for p in config.profiles)
    print(f"Wrote {path} (mode 0600) with {len(config.profiles)} profile(s): {names}.")
    print("Next: `claudex check`, then `claudex serve` and, in another terminal, `claudex run`.")
    return 0


def _init_from_ccr(source: Path, path: Path) -> int:
    """`claudex init --from-ccr FILE`: the claude-code-router config as a claudex one."""
    from claudex.config.atomic_files import write_text_atomic
    from claudex.config.ccr_json import CcrFileError
    from claudex.config.from_ccr import convert_ccr
    from claudex.config.loader import parse_config

    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
        raise CliError(f"Cannot read {source}: {why}") from None
    try:
        converted = convert_ccr(text, str(source))
    except CcrFileError as exc:
        raise CliError(f"{exc} — nothing was written") from None
    # What init writes must load; a failure here is claudex's bug, reported before any write.
    parse_config(converted.text, str(path), env={})
    try:
        write_text_atomic(path, converted.text, 0o600)
    except OSError as exc:
        raise CliError(f"Cannot write {path}: {exc.strerror or type(exc).__name__}") from None
    print(f"Wrote {path} (mode 0600) from {source}: {len(converted.profiles)} profile(s) "
          f"({', '.join(converted.profiles)}), default {converted.default_profile}.")
    for route, profile in converted.routes.items():
        print(f"  route {route} -> {profile}")
    if converted.variables:
        print("Set these variables before `claudex serve` (no key was copied):")
        for variable, why in converted.variables.items():
            print(f"  {variable}: {why}")
    print("Next: `claudex check`, then `claudex serve` and, in another terminal, `claudex run`.")
    return 0
