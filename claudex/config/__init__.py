"""Profiles and settings: load, validate, edit in place."""

from claudex.config.loader import check_config, load_config, parse_config
from claudex.config.model import (
    BreakerSettings,
    Config,
    ConfigError,
    ConfigIssue,
    HealthSettings,
    Pool,
    Profile,
    ProxySettings,
    RetrySettings,
)
from claudex.config.paths import default_config_path

__all__ = [
    "BreakerSettings",
    "Config",
    "ConfigError",
    "ConfigIssue",
    "HealthSettings",
    "Pool",
    "Profile",
    "ProxySettings",
    "RetrySettings",
    "check_config",
    "default_config_path",
    "load_config",
    "parse_config",
]
