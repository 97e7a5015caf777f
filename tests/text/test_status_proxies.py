"""`claudex status` with upstream proxies (issue 36): a route column only when some profile is
routed through a proxy, the route's trouble beside it, and a proxies table only when the status
lists proxies — with passwords masked even if an engine left one in a URL."""

from __future__ import annotations

from typing import Any

from rich.console import Console

from claudex.text.status import mask_url_password, render_status

PLAIN = {"name": "claude", "provider_type": "DirectAnthropic", "health": {"color": "green"},
         "breaker": {"state": "closed"}, "stats": {}}
CORP = {"name": "corp", "url": "http://alice:****@proxy.corp:3128",
        "breaker": {"state": "open", "consecutive_failures": 3, "retry_in_s": 18.0},
        "health": "red", "requests": 120, "failures": 3,
        "last_error": "connection refused", "profiles": ["claude"]}


def _text(data: dict[str, Any]) -> str:
    out = Console(width=220, record=True, color_system=None)
    render_status({"listen": "127.0.0.1:8082", **data}, out)
    return out.export_text()


def test_no_proxies_no_route_column_and_no_proxies_table() -> None:
    text = _text({"profiles": [PLAIN, {**PLAIN, "name": "direct-one",
                                       "route": {"label": "direct", "proxies": [],
                                                 "trouble": None}}]})
    assert "route" not in text and "upstream proxies" not in text
    assert "upstream proxies" not in _text({"profiles": [PLAIN], "upstream_proxies": []})


def test_routes_and_proxies_are_listed() -> None:
    routed = {**PLAIN, "route": {"label": "via corp", "proxies": ["corp"],
                                 "trouble": "proxy corp open (connection refused)"}}
    direct = {**PLAIN, "name": "grok"}
    text = _text({"profiles": [routed, direct], "upstream_proxies": [CORP]})
    assert "route" in text
    assert "via corp · proxy corp open (connection refused)" in text
    grok_line = next(line for line in text.splitlines() if "grok" in line)
    assert "direct" in grok_line
    assert "upstream proxies" in text
    corp_line = next(line for line in text.splitlines() if "● corp" in line)
    for words in ("http://alice:****@proxy.corp:3128", "open 18s", "120/3", "claude",
                  "connection refused"):
        assert words in corp_line, words


def test_a_password_in_a_proxy_url_is_masked() -> None:
    leaky = {**CORP, "url": "http://alice:s3cretpass@proxy.corp:3128"}
    text = _text({"profiles": [PLAIN], "upstream_proxies": [leaky]})
    assert "s3cretpass" not in text and "alice:****@proxy.corp:3128" in text
    assert mask_url_password("socks5h://u:p@h:1080 and http://h:3128") == (
        "socks5h://u:****@h:1080 and http://h:3128")


def test_the_engines_reason_and_a_disabled_proxy_are_said() -> None:
    proxy = {**CORP, "breaker": {"state": "closed"}, "health_reason": "proxy auth failed",
             "enabled": False}
    text = _text({"profiles": [PLAIN], "upstream_proxies": [proxy]})
    assert "disabled · closed · proxy auth failed" in text
