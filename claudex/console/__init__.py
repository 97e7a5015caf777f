"""The operations console: a Textual app over an `EngineLink` (an engine on the console's own
loop: `LocalLink`; on a thread of its own, as `claudex console` runs it: `ThreadedLink`)."""

from claudex.console.app import ConsoleApp
from claudex.console.link import DemoHooks, EngineLink, LocalLink
from claudex.console.threaded_link import ThreadedLink

__all__ = ["ConsoleApp", "DemoHooks", "EngineLink", "LocalLink", "ThreadedLink"]
