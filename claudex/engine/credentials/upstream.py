"""What the forwarding core, the health probes and the status read of a profile's upstream
credentials: `Credentials` (cache.py: keys, OAuth, token commands) is one; a cloud profile's
(engine/clouds/credentials.py: a SigV4-signed profile's, Google's minted tokens) are others."""

from __future__ import annotations

from typing import Literal, Protocol

from claudex.config.model import Profile
from claudex.engine.credentials.auth_headers import AuthHeaders

__all__ = ["UpstreamCredentials"]


class UpstreamCredentials(Protocol):
    @property
    def profile(self) -> Profile: ...

    @property
    def status(self) -> str | None: ...  # None, or "needs login"

    def mark_ok(self) -> None: ...

    def headers_now(self) -> AuthHeaders | Literal[False] | None: ...

    async def auth_headers(self) -> AuthHeaders | None: ...

    async def refresh_after_401(self, failed: AuthHeaders) -> bool: ...

    async def changed_outside(self) -> str | None: ...
