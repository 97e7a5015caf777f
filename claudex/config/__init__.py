"""Profiles and settings: load, validate, edit in place."""

from claudex.config.model import (
    BreakerSettings,
    Config,
    ConfigError,
    ConfigIssue,
    HealthSettings,
    Profile,
    ProxySettings,
    RetrySettings,
)

__all__ = [
    "BreakerSettings",
    "Config",
    "ConfigError",
    "ConfigIssue",
    "HealthSettings",
    "Profile",
    "ProxySettings",
    "RetrySettings",
]
