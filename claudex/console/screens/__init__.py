"""The console's screens: the main dashboard, help, and the confirm dialog."""

from claudex.console.screens.confirm import ConfirmScreen
from claudex.console.screens.help import HelpLine, HelpScreen

__all__ = ["ConfirmScreen", "HelpLine", "HelpScreen"]
