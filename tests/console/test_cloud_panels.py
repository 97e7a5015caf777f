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


async def test_a_screenshot_of_a_signed_bedrock_profile_shows_no_secret(
        proxy_factory: Any, monkeypatch: Any, tmp_path: Any) -> None:
    """The panel drawn from a real engine's status after signed requests, saved as the
    screenshots are (SVG): no AWS secret key, no API key in it."""
    from claudex.demo.fake_bedrock import FakeBedrock
    from tests.cloud_world import KEY, bedrock_toml, isolate_cloud_env
    from tests.conftest import TEST_ENV, build_config

    isolate_cloud_env(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", KEY.access_key_id)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", KEY.secret_access_key)
    async with FakeBedrock(keys=[KEY], api_keys=[TEST_ENV["FAKE_KEY"]]) as bedrock:
        proxy = await proxy_factory(build_config(
            bedrock_toml("bedrock", bedrock.base_url, auth="")
            + bedrock_toml("keyed", bedrock.base_url)))
        for profile in ("bedrock", "keyed"):
            assert (await proxy.messages(profile=profile)).status_code == 200
        bedrock.set_fault("unavailable")
        await proxy.messages(profile="bedrock")  # a last error to show
        snapshot = proxy.engine.snapshot()
    app = _Host()
    async with app.run_test(size=(100, 12)) as pilot:
        panel = app.query_one(ProviderPanel)
        panel.show(snapshot["profiles"][0], [], 0.0, selected=True)
        await pilot.pause()
        svg = app.export_screenshot()
    assert "ServiceUnavailableException" in svg  # the panel's last error, drawn
    for secret in (KEY.secret_access_key, TEST_ENV["FAKE_KEY"]):
        assert secret not in svg
