"""Routes: which profile serves a request on a default route (DESIGN.md "Routes").

`[routes]` first (long_context, web_search, thinking, background: facts of the request,
`routes.py`), then Claudex's `[router]` (a classifier asked once per conversation,
`intents.py`, through `classifier.py`). The chosen profile — or pool — is then addressed like
`/proxy/NAME/...`: its own chain serves. Requests to `/proxy/NAME/...` are never routed, and
`count_tokens` neither (it is no turn of a conversation).

The engine builds a `Routing` only when the config has routes or an enabled router; without
one, a request pays nothing for this feature.
"""

from __future__ import annotations

from collections.abc import Callable

from claudex.config.model import Config, Profile, RoutesSettings
from claudex.engine.core.request import ProxyRequest, Routed
from claudex.engine.routing.classifier import Forward, ProfileClassifier
from claudex.engine.routing.intents import TIMEOUT_S, IntentRouter
from claudex.engine.routing.routes import route_of

__all__ = ["Routing", "build_routing"]


class Routing:
    def __init__(self, routes: RoutesSettings, router: IntentRouter | None) -> None:
        self.routes = routes
        self.router = router
        self._by_facts = routes.configured

    async def choose(self, req: ProxyRequest) -> Routed | None:
        """The route `req` takes, or None: the default profile serves it."""
        if self._by_facts:
            name = route_of(req.protocol, req.body, req.raw, self.routes)
            if name is not None:
                return Routed(name, getattr(self.routes, name))
        if self.router is not None:
            decision = await self.router.decide(req.protocol, req.headers, req.body)
            if decision.profile is not None:
                return Routed(f"router:{decision.category}", decision.profile)
        return None


def build_routing(config: Config, old: Routing | None, forward: Forward,
                  profile_of: Callable[[str], Profile | None], *,
                  timeout_s: float = TIMEOUT_S) -> Routing | None:
    """The routing `config` asks for, or None. `profile_of` finds a profile in the engine's
    config of the moment, `forward` serves the classifier's question. A router whose settings
    did not change is kept across a reload, and with it what it learnt of each conversation."""
    if not config.routes.configured and not config.router.active:
        return None
    router: IntentRouter | None = None
    if config.router.active:
        kept = old.router if old is not None else None
        if kept is not None and kept.settings == config.router:
            router = kept
        else:
            router = IntentRouter(config.router,
                                  ProfileClassifier(config.router, profile_of, forward),
                                  timeout_s=timeout_s)
    return Routing(config.routes, router)
