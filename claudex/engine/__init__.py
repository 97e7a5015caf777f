"""Pure logic and asyncio: breaker, backoff, classify, credentials, failover, health, events.

The engine never imports the server, the console or Textual.
"""
