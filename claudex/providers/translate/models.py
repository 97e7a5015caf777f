"""Model lists (`GET /v1/models`) in either protocol's shape.

Anthropic: `{"data": [{"type": "model", "id", "display_name", "created_at": RFC 3339}],
"has_more", "first_id", "last_id"}`; OpenAI: `{"object": "list", "data": [{"id",
"object": "model", "created": epoch seconds, "owned_by"}]}`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, Literal

EPOCH = "1970-01-01T00:00:00Z"


def _iso(seconds: Any) -> str:
    if isinstance(seconds, int | float) and not isinstance(seconds, bool) and seconds > 0:
        return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return EPOCH


def _epoch(stamp: Any) -> int:
    if isinstance(stamp, str):
        try:
            return int(datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp())
        except ValueError:
            return 0
    return 0


def models_list(ids: Iterable[str], *, protocol: Literal["anthropic", "openai"],
                owned_by: str = "claudex") -> dict[str, Any]:
    """A list of model ids (e.g. from the profiles) in the client's shape."""
    unique = list(dict.fromkeys(ids))
    if protocol == "openai":
        return {"object": "list", "data": [
            {"id": model, "object": "model", "created": 0, "owned_by": owned_by}
            for model in unique]}
    return {"data": [{"type": "model", "id": model, "display_name": model, "created_at": EPOCH}
                     for model in unique],
            "has_more": False,
            "first_id": unique[0] if unique else None,
            "last_id": unique[-1] if unique else None}


def openai_models_to_anthropic(body: dict[str, Any]) -> dict[str, Any]:
    data = [m for m in body.get("data") or () if isinstance(m, dict) and m.get("id")]
    out = models_list([str(m["id"]) for m in data], protocol="anthropic")
    created = {str(m["id"]): _iso(m.get("created")) for m in data}
    for item in out["data"]:
        item["created_at"] = created.get(item["id"], EPOCH)
    return out


def anthropic_models_to_openai(body: dict[str, Any], *,
                               owned_by: str = "anthropic") -> dict[str, Any]:
    data = [m for m in body.get("data") or () if isinstance(m, dict) and m.get("id")]
    out = models_list([str(m["id"]) for m in data], protocol="openai", owned_by=owned_by)
    created = {str(m["id"]): _epoch(m.get("created_at")) for m in data}
    for item in out["data"]:
        item["created"] = created.get(item["id"], 0)
    return out
