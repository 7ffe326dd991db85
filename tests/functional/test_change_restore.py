"""The change feed and the caches around a database restored from a
backup (SQLite, in-process; ``test_backup_restore.py`` does the same
under ``berth serve`` on every backend): a position the database never
reached is answered 410 with its own message, in the API and ``berth
watch``; a pruned one says the oldest position once; ``berth db
mark-restored`` makes every cache reload and every reader list again.
"""

from __future__ import annotations

import sqlite3
import time
import uuid as uuidlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from berth.api.app import create_app
from berth.cli.run import main
from berth.db import events, setup
from berth.db.engine import Database, create_engine
from tests.conftest import Client, make_conf

CANDIDATES = {"resources": "VCPU:1"}


class Placement:
    """Two applications (two workers) over one SQLite database, and a
    configuration file naming it for the command line."""

    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "placement.sqlite"
        self.conf_file = tmp_path / "placement.conf"
        self.conf_file.write_text(
            "[api]\nauth_strategy = noauth2\n[placement_database]\n"
            "connection = sqlite:///%s\n" % self.path)
        engine = create_engine("sqlite:///%s" % self.path)
        setup.prepare(engine)
        self.db = Database(engine)
        self.workers = [Client(create_app(make_conf(), self.db))
                        for _ in range(2)]

    @property
    def args(self) -> list[str]:
        return ["--config-file", str(self.conf_file)]

    def position(self) -> str:
        # Past the half second a worker keeps the position it read.
        time.sleep(0.6)
        return str(self.workers[0].get("/").headers["berth-position"])

    def provider(self, name: str) -> str:
        uuid = str(uuidlib.uuid4())
        client = self.workers[0]
        assert client.post("/resource_providers", json={
            "name": name, "uuid": uuid}).status_code == 200
        assert client.put("/resource_providers/%s/inventories" % uuid, json={
            "resource_provider_generation": 0,
            "inventories": {"VCPU": {"total": 8}}}).status_code == 200
        return uuid

    def candidates(self) -> list[set[str]]:
        """Each worker's candidate providers."""
        found = []
        for client in self.workers:
            resp = client.get("/allocation_candidates", params=CANDIDATES)
            assert resp.status_code == 200, resp.text
            found.append(set(resp.json()["provider_summaries"]))
        return found

    def copy(self, source: Path, target: Path) -> None:
        """SQLite's online backup, as docs/install.md gives it."""
        with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
            src.backup(dst)


@pytest.fixture
def placement(tmp_path: Path) -> Iterator[Placement]:
    found = Placement(tmp_path)
    yield found
    for client in found.workers:
        client.close()
    found.db.engine.dispose()


def gone(client: Client, after: str) -> dict[str, Any]:
    resp = client.get("/berth/changes", params={"after": after})
    assert resp.status_code == 410, resp.text
    error: dict[str, Any] = resp.json()["errors"][0]
    assert error["code"] == "berth.changes.gone"
    return error


def refused(capsys: Any, args: list[str]) -> str:
    """The one error line of ``berth watch``."""
    with pytest.raises(SystemExit) as exit_:
        main(["watch", "--once", *args])
    line = str(exit_.value)
    assert line.startswith("berth: error: ") and "\n" not in line
    assert len(line) < 200, line
    assert capsys.readouterr().out == ""
    return line


def test_a_position_ahead_of_the_database(placement: Placement,
                                          capsys: Any) -> None:
    placement.provider("a")
    now = placement.position()
    slot, seq = (int(x) for x in now.split(":"))
    ahead = "%d:%d" % (slot, seq + 4711)
    said = ("Position %s is ahead of this database (at %s): was it restored "
            "from a backup? List again" % (ahead, now))
    error = gone(placement.workers[0], ahead)
    assert said in error["detail"]
    assert error["oldest_position"] == "0"
    line = refused(capsys, ["--after", ahead, *placement.args])
    assert line.startswith("berth: error: " + said), line


def test_a_pruned_position_says_the_oldest_once(placement: Placement,
                                                capsys: Any) -> None:
    start = placement.position()
    placement.provider("a")
    now = placement.position()
    slot = int(now.split(":")[0])
    placement.db.run(lambda conn: events.prune(conn, slot, time.time() + 1))
    error = gone(placement.workers[0], start)
    said = ("The change feed no longer holds the events after position %s "
            "(the oldest position it can read on from is %s): list again"
            % (start, now))
    assert said in error["detail"] and error["oldest_position"] == now
    line = refused(capsys, ["--after", start, *placement.args])
    assert line.startswith("berth: error: " + said), line
    assert line.count("oldest position") == 1


def test_mark_restored_makes_the_caches_follow(placement: Placement,
                                               tmp_path: Path,
                                               capsys: Any) -> None:
    state_a = {placement.provider("a")}
    at_a = placement.position()
    backup = tmp_path / "backup.sqlite"
    placement.copy(placement.path, backup)
    state_b = {placement.provider("b")}
    at_b = placement.position()
    assert placement.candidates() == [state_a | state_b] * 2

    placement.copy(backup, placement.path)
    # The sequence went back: the feed says so; the caches, which take a
    # sequence behind them for a read that started earlier, do not.
    assert "ahead of this database (at %s)" % at_a in gone(
        placement.workers[1], at_b)["detail"]
    assert placement.candidates() == [state_a | state_b] * 2

    assert main(["db", "mark-restored", *placement.args]) == 0
    slot, seq = (int(x) for x in at_a.split(":"))
    marked = "%d:%d" % (slot, seq + 2 ** 32)
    assert "change sequence moved on to %s:" % marked in capsys.readouterr().out
    assert placement.candidates() == [state_a] * 2
    # Numbers go on from there; every position handed out before is
    # older than the history kept, even once new writes pass it.
    state_c = {placement.provider("c")}
    assert placement.candidates() == [state_a | state_c] * 2
    for old in (at_a, at_b):
        assert gone(placement.workers[0], old)["oldest_position"] == marked
    resp = placement.workers[1].get("/berth/changes",
                                    params={"after": marked})
    assert [e["kind"] for e in resp.json()["events"]] == [
        events.PROVIDER_CREATED, events.INVENTORIES_SET]
