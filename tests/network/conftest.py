"""The network tests' fixtures: real proxies, the fault proxy, the test PKI and TLS fronts
(tests/proxy_servers.py). Every test here runs without the machine's CA and proxy variables
(`clean_network_env`, autouse)."""

from __future__ import annotations

from tests.proxy_servers import (  # noqa: F401  (fixtures, registered by importing them)
    clean_network_env,
    fake_proxy,
    microsocks,
    microsocks_auth,
    mitmdump,
    pki,
    tinyproxy,
    tls_front,
)
