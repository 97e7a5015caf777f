"""A Bedrock or Vertex profile in the console (issue 37): its panel says the cloud, where and how
it signs, and what the cloud refused and is now left out."""

from __future__ import annotations

from typing import Any

from textual.app import App, ComposeResult

from claudex.console.components.provider_panel import ProviderPanel
from claudex.console.format import cloud_label, learned_drops, limit_words, protocol_label

BEDROCK: dict[str, Any] = {
    "name": "bedrock", "provider_type": "Bedrock",
    "health": {"color": "green", "reason": "ok (probe unsupported: bedrock has no request that "
               "costs nothing; health from traffic)"},
    "breaker": {"state": "closed", "consecutive_failures": 0}, "stats": {},
    "cloud": {"wire": "bedrock", "region": "us-east-1", "signed": "sigv4", "learned": {
        "us.anthropic.claude-sonnet-4-5-20250929-v1:0": {
            "dropped_fields": ["context_management"], "betas": "documented"}}},
}
VERTEX: dict[str, Any] = {"provider_type": "Vertex", "cloud": {
    "wire": "vertex", "region": "global", "project": "my-project", "tokens": "google-auth"}}


def test_the_words_for_a_cloud_profile() -> None:
    assert protocol_label("Bedrock") == "bedrock" and protocol_label("Vertex") == "vertex"
    assert cloud_label(BEDROCK) == "us-east-1 · sigv4"
    assert cloud_label(VERTEX) == "my-project/global"
    assert cloud_label({"provider_type": "DirectAnthropic", "cloud": None}) == ""
    assert learned_drops(BEDROCK) == " · drops context_management · betas: documented only"
    assert limit_words(BEDROCK).endswith("drops context_management · betas: documented only")
    assert learned_drops(VERTEX) == ""


class _Host(App[None]):
    def compose(self) -> ComposeResult:
        yield ProviderPanel("bedrock")


async def test_the_panel_names_the_cloud_and_says_why_the_probe_is_unsupported() -> None:
    app = _Host()
    async with app.run_test(size=(100, 12)) as pilot:
        panel = app.query_one(ProviderPanel)
        panel.show(BEDROCK, [], 0.0, selected=False)
        await pilot.pause()
        assert panel.border_subtitle == "bedrock us-east-1 · sigv4"
        assert "probe unsupported" in str(panel.status_line.render())
        assert "drops context_management" in str(panel.counts_line.render())
