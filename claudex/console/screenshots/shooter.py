"""What every screenshot is taken with: `Shooter` settles the console (twice, so what a refresh
itself caused shows too) and keeps each state's SVG, ready for rsvg-convert (`svg_for_rsvg`).
The scenes (scenes.py) and the provider table's shots (table.py) both use it."""

from __future__ import annotations

from textual.pilot import Pilot

from claudex.console.app import ConsoleApp


def svg_for_rsvg(svg: str) -> str:
    """Rich's SVG starts text runs with non-breaking spaces that rsvg drops unless told to keep
    whitespace; browsers do not mind the attribute."""
    if 'xml:space="preserve"' in svg:
        return svg
    return svg.replace("<svg ", '<svg xml:space="preserve" ', 1)


class Shooter:
    def __init__(self, app: ConsoleApp, pilot: Pilot[None]) -> None:
        self.app = app
        self.pilot = pilot
        self.pictures: dict[str, str] = {}  # name -> SVG text

    async def settle(self) -> None:
        # Twice: a refresh can itself cause events (a breaker turning half-open as the snapshot
        # reads the clock), which the second one shows.
        for _ in range(2):
            await self.pilot.pause()
            await self.app.main_screen.refresh_now()
        await self.pilot.pause()
        await self.pilot.wait_for_scheduled_animations()

    async def shoot(self, name: str) -> None:
        await self.settle()
        self.pictures[name] = svg_for_rsvg(self.app.export_screenshot(title=f"claudex — {name}"))
