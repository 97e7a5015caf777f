"""The soak keeps claudex's state in its own folder, never in the user's (DESIGN.md, Testing).

Issue 38: `python -m soak` started its `claudex serve` with the default `[history]` path, and four
soaks left 229,607 fake requests in a user's own journal, shown by `claudex history` and the
console as theirs. Here the user's home and state dir are a folder of the test's, set as a user's
shell would set them (tests/conftest.py points every test at a scratch state dir; this test puts
a "user's" one in its place), and the soak's instances must leave it untouched while their own
journals get every request.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from soak.fleet import FleetPlan, FleetSoak
from soak.traffic import drive
from soak.world import Limits, World


@pytest.fixture
def users_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_STATE_HOME", str(home / ".local" / "state"))
    return home


def untouched(home: Path) -> bool:
    """Nothing at all in the user's home: no ~/.local/state/claudex."""
    return not any(home.iterdir())


def journal_requests(path: Path) -> int:
    with sqlite3.connect(path) as conn:
        return int(conn.execute("SELECT count(*) FROM requests").fetchone()[0])


async def send(url: str, count: int, first_id: int = 0) -> None:
    await drive(url, seed=5, clients=4, first_id=first_id, count=count, until=None,
                time_limit=30.0, think_ms=0.0, on_done=lambda _: None)


async def test_the_soaks_world_keeps_its_journal_out_of_the_users_state_dir(
        tmp_path: Path, users_home: Path) -> None:
    workdir = tmp_path / "soak"
    workdir.mkdir()
    world = World(workdir, Limits())
    await world.start()
    try:
        assert world.serve is not None
        await send(world.serve.url, 40)
    finally:
        assert await world.stop() == 0
    assert untouched(users_home)
    assert journal_requests(world.history) == 40
    assert world.history.is_relative_to(workdir)


async def test_the_fleet_soaks_instances_each_keep_a_journal_of_their_own(
        tmp_path: Path, users_home: Path) -> None:
    workdir = tmp_path / "fleet"
    workdir.mkdir()
    soak = FleetSoak(FleetPlan(instances=2), workdir, say=lambda _: None)
    try:
        await soak.start()
        for i, inst in enumerate(soak.instances):
            await send(inst.url, 10, first_id=100 * i)
    finally:
        await soak.close()
    assert untouched(users_home)
    journals = {name: soak.state_dir / name / "history.sqlite3" for name in ("i0", "i1")}
    assert {name: journal_requests(path) for name, path in journals.items()} == \
        {"i0": 10, "i1": 10}
