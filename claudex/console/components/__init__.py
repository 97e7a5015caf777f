"""Small widgets of the main screen, each fed from the engine's snapshot or its events."""

from claudex.console.components.chain_view import ChainView
from claudex.console.components.event_log import EventLog
from claudex.console.components.header import HeaderBar
from claudex.console.components.provider_panel import ProviderPanel
from claudex.console.components.request_log import RequestLog

__all__ = ["ChainView", "EventLog", "HeaderBar", "ProviderPanel", "RequestLog"]
