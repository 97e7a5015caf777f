"""The operations console: a Textual app over an `EngineLink` (in-process: `LocalLink`)."""

from claudex.console.app import ConsoleApp
from claudex.console.link import DemoHooks, EngineLink, LocalLink

__all__ = ["ConsoleApp", "DemoHooks", "EngineLink", "LocalLink"]
