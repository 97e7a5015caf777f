"""How claudex reaches a provider: upstream proxies from the config or the environment, the
certificates it trusts and presents, and which failures are a proxy's rather than a provider's
(issue 36; docs/networks.md)."""
