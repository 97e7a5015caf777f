"""claudex: a local failover proxy for LLM API providers with a terminal operations console."""

__version__ = "0.1.0"
