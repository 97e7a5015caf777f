"""`claudex init`'s `[network]` section (issue 36): what a corporate machine's environment says
about reaching the providers, as Claude Code reads it there.

- `HTTPS_PROXY` / `https_proxy` set: `upstream_proxy = "env"`, with a comment naming the variable
  and its URL with any password masked (the URL itself is never copied: "env" reads it where
  claudex runs, with `NO_PROXY`).
- `NODE_EXTRA_CA_CERTS` (what Claude Code users behind a TLS-intercepting proxy set): `ca_bundle`.
- `CLAUDE_CODE_CLIENT_CERT` / `CLAUDE_CODE_CLIENT_KEY` (Claude Code's mTLS): `client_cert`,
  `client_key`, and `client_key_password_env = "CLAUDE_CODE_CLIENT_KEY_PASSPHRASE"` when that
  variable is set (its name only).

A file that does not load (unreadable, no PEM, a key that does not match) is written commented
out with the reason, since `claudex check` would refuse it and init writes only a config that
loads. Nothing is written when none of these is set.
"""

from __future__ import annotations

import os
import ssl
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy")
CA_VARIABLE = "NODE_EXTRA_CA_CERTS"
CERT_VARIABLE = "CLAUDE_CODE_CLIENT_CERT"
KEY_VARIABLE = "CLAUDE_CODE_CLIENT_KEY"
PASSPHRASE_VARIABLE = "CLAUDE_CODE_CLIENT_KEY_PASSPHRASE"


@dataclass
class NetworkFound:
    lines: list[str] = field(default_factory=list)   # the section's TOML (no trailing newline)
    report: list[str] = field(default_factory=list)  # what init says it saw

    @property
    def any(self) -> bool:
        return bool(self.lines)


def shown_proxy_url(url: str) -> str:
    """The proxy URL with its password (if any) replaced by `****`; a value that is not a URL
    at all is shown only by its length, since it may be a secret pasted in the wrong place."""
    raw = url.strip()
    with_scheme = raw if "://" in raw else f"http://{raw}"
    try:
        parts = urlsplit(with_scheme)
        host = parts.hostname
        port = parts.port
    except ValueError:
        host, port = None, None
    # Scheme-less, port-less and dot-less is more likely a secret pasted in the wrong place.
    if not host or ("://" not in raw and port is None and "." not in host):
        return f"(a value of {len(raw)} characters that is not a URL)"
    user = parts.username
    auth = f"{user}:****@" if user and parts.password is not None else f"{user}@" if user else ""
    where = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{auth}{where}" + (f":{port}" if port else "")


def _toml_string(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _ca_problem(path: str) -> str | None:
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_verify_locations(
            cafile=os.path.expanduser(path))
    except OSError as error:
        return error.strerror or type(error).__name__
    except (ssl.SSLError, ValueError) as error:
        return f"no PEM certificate in it ({type(error).__name__})"
    return None


def _chain_problem(cert: str, key: str | None, password: str) -> str | None:
    try:
        # The password is always given (empty when none): OpenSSL would prompt otherwise.
        ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).load_cert_chain(
            os.path.expanduser(cert), os.path.expanduser(key) if key else None,
            password=lambda: password)
    except OSError as error:
        return error.strerror or type(error).__name__
    except (ssl.SSLError, ValueError) as error:
        return f"the certificate and key do not load together ({type(error).__name__})"
    return None


def _key(lines: list[str], key: str, value: str, problem: str | None) -> None:
    if problem is None:
        lines.append(f"{key} = {_toml_string(value)}")
    else:
        lines.append(f"# {key} = {_toml_string(value)}   # not loadable here: {problem}")


def discover_network(environ: Mapping[str, str]) -> NetworkFound:
    found = NetworkFound()
    lines = found.lines
    proxy = next(((name, environ[name]) for name in PROXY_VARIABLES
                  if environ.get(name, "").strip()), None)
    if proxy is not None:
        shown = shown_proxy_url(proxy[1])
        lines += [f"# {proxy[0]} was set ({shown}): requests to providers go through the",
                  "# proxy the environment names where claudex runs, NO_PROXY honoured (a",
                  "# provider on this machine never goes through it). A proxy's password stays",
                  "# in the environment: it is never copied here.",
                  'upstream_proxy = "env"']
        found.report.append(f"{proxy[0]}: {shown} -> [network] upstream_proxy = \"env\"")
    ca = environ.get(CA_VARIABLE, "").strip()
    if ca:
        problem = _ca_problem(ca)
        lines.append(f"# {CA_VARIABLE} (the certificates Claude Code trusts besides the "
                     "system's):")
        _key(lines, "ca_bundle", ca, problem)
        found.report.append(f"{CA_VARIABLE}: {ca} -> ca_bundle"
                            + (f" (commented out: {problem})" if problem else ""))
    cert = environ.get(CERT_VARIABLE, "").strip()
    key = environ.get(KEY_VARIABLE, "").strip()
    if cert:
        passphrase = bool(environ.get(PASSPHRASE_VARIABLE))
        problem = _chain_problem(cert, key or None, environ.get(PASSPHRASE_VARIABLE, ""))
        lines.append(f"# {CERT_VARIABLE}" + (f" / {KEY_VARIABLE}" if key else "")
                     + ": Claude Code's client certificate (mTLS)")
        _key(lines, "client_cert", cert, problem)
        if key:
            _key(lines, "client_key", key, problem)
        if passphrase:
            _key(lines, "client_key_password_env", PASSPHRASE_VARIABLE, problem)
        found.report.append(f"{CERT_VARIABLE}: {cert} -> client_cert"
                            + (f", {KEY_VARIABLE} -> client_key" if key else "")
                            + (f" (commented out: {problem})" if problem else ""))
    elif key:
        # A key alone is refused by `claudex check`: say so rather than write it.
        lines.append(f"# {KEY_VARIABLE} is set without {CERT_VARIABLE}; a client key needs its")
        lines.append(f"# certificate: client_key = {_toml_string(key)}")
        found.report.append(f"{KEY_VARIABLE}: set without {CERT_VARIABLE}, not used")
    if lines:
        lines[:0] = ["", "# How claudex reaches the providers, from this environment (see",
                     "# docs/networks.md, \"Networks: proxies and certificates\").", "[network]"]
    return found


def with_network(text: str, found: NetworkFound) -> str:
    """The starter config with the `[network]` section before its first profile."""
    if not found.any:
        return text
    block = "\n".join(found.lines) + "\n"
    at = text.find("\n[[profiles]]")
    if at < 0:
        return text.rstrip("\n") + "\n" + block
    return text[:at] + block + text[at:]
