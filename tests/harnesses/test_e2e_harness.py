"""The parts of `make e2e` that need no Claude Code: the refusing proxy, the reading of
claudex's request log, the choice of Claude Code's platform package."""

from __future__ import annotations

import socket
from unittest import mock

import httpx
import pytest

from e2e import claude_code
from e2e.harness import ServeProcess
from e2e.refusing_proxy import RefusingProxy


def raw_exchange(url: str, request: bytes) -> bytes:
    host, port = url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(4096):
            answer += chunk
    return answer


def test_the_proxy_refuses_and_records_tunnels_and_plain_requests() -> None:
    with RefusingProxy() as proxy:
        answer = raw_exchange(proxy.url, b"CONNECT api.anthropic.com:443 HTTP/1.1\r\n"
                                         b"Host: api.anthropic.com:443\r\n"
                                         b"User-Agent: probe/1\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 403 ")
        with httpx.Client(proxy=proxy.url) as client:
            assert client.get("http://example.invalid/x").status_code == 403
        with pytest.raises(httpx.ProxyError):
            httpx.get("https://example.invalid/", proxy=proxy.url)
        attempts = [(a.method, a.target, a.host) for a in proxy.attempts]
        assert attempts == [("CONNECT", "api.anthropic.com:443", "api.anthropic.com"),
                            ("GET", "http://example.invalid/x", "example.invalid"),
                            ("CONNECT", "example.invalid:443", "example.invalid")]
        assert proxy.attempts[0].user_agent == "probe/1"
        assert proxy.since(2)[0].target == "example.invalid:443"


def test_claudex_request_lines_are_read_with_every_attempt() -> None:
    log = ["09:39:37 INFO    claudex.server: claudex listening on http://127.0.0.1:1",
           "09:39:37 DEBUG   claudex.engine: request anthropic claude-opus-5-5 -> oai 200 "
           "[anth 500 -> oai 200] 7.3 ms dropped: cache_control, thinking",
           "09:39:38 DEBUG   claudex.engine: request anthropic claude-opus-5-5 -> none 502 "
           "[anth breaker_open -> oai connect_error] 1.0 ms"]
    served = ServeProcess(mock.Mock(), "http://127.0.0.1:1", log, mock.Mock(), mock.Mock())
    first, second = served.requests()
    assert (first.model, first.provider, first.status) == ("claude-opus-5-5", "oai", "200")
    assert first.attempts == (("anth", "500"), ("oai", "200"))
    assert second.attempts == (("anth", "breaker_open"), ("oai", "connect_error"))
    assert second.status == "502"


@pytest.mark.parametrize(("system", "machine", "package"), [
    ("linux", "x86_64", "@anthropic-ai/claude-code-linux-x64"),
    ("linux", "aarch64", "@anthropic-ai/claude-code-linux-arm64"),
    ("darwin", "arm64", "@anthropic-ai/claude-code-darwin-arm64"),
])
def test_the_platform_package_follows_the_machine(system: str, machine: str,
                                                  package: str) -> None:
    with mock.patch.object(claude_code.sys, "platform", system), \
            mock.patch.object(claude_code.platform, "machine", return_value=machine), \
            mock.patch.object(claude_code.Path, "glob", return_value=iter(())):
        assert claude_code.platform_package() == package
    with mock.patch.object(claude_code.platform, "machine", return_value="sparc"), \
            pytest.raises(claude_code.InstallError):
        claude_code.platform_package()


def test_the_cache_is_under_xdg_cache_home(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", "/somewhere")
    assert str(claude_code.cache_dir()) == \
        f"/somewhere/claudex-e2e/claude-code-{claude_code.VERSION}"
