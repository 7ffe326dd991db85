"""The change feed and the caches around a database restored from a
backup (SQLite, in-process; ``test_backup_restore.py`` does the same
under ``berth serve`` on every backend): a position the database never
reached is answered 410 with its own message, in the API and ``berth
watch``; a pruned one says the oldest position once; ``berth db
mark-restored`` makes every cache reload and every reader list again.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from berth.cli.run import main
from berth.db import events
from support.app_client import Placement
from tests.conftest import Client


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


def test_a_position_ahead_of_the_database(restored_placement: Placement, capsys: Any) -> None:
    restored_placement.provider("a")
    now = restored_placement.position()
    slot, seq = (int(x) for x in now.split(":"))
    ahead = "%d:%d" % (slot, seq + 4711)
    said = (
        "Position %s is ahead of this database (at %s): was it restored "
        "from a backup? List again" % (ahead, now)
    )
    error = gone(restored_placement.workers[0], ahead)
    assert said in error["detail"]
    assert error["oldest_position"] == "0"
    line = refused(capsys, ["--after", ahead, *restored_placement.args])
    assert line.startswith("berth: error: " + said), line


def test_a_pruned_position_says_the_oldest_once(restored_placement: Placement, capsys: Any) -> None:
    start = restored_placement.position()
    restored_placement.provider("a")
    now = restored_placement.position()
    slot = int(now.split(":")[0])
    restored_placement.db.run(lambda conn: events.prune(conn, slot, time.time() + 1))
    error = gone(restored_placement.workers[0], start)
    said = (
        "The change feed no longer holds the events after position %s "
        "(the oldest position it can read on from is %s): list again" % (start, now)
    )
    assert said in error["detail"] and error["oldest_position"] == now
    line = refused(capsys, ["--after", start, *restored_placement.args])
    assert line.startswith("berth: error: " + said), line
    assert line.count("oldest position") == 1


def test_mark_restored_makes_the_caches_follow(
    restored_placement: Placement, tmp_path: Path, capsys: Any
) -> None:
    state_a = {restored_placement.provider("a")}
    at_a = restored_placement.position()
    backup = tmp_path / "backup.sqlite"
    restored_placement.copy(restored_placement.path, backup)
    state_b = {restored_placement.provider("b")}
    at_b = restored_placement.position()
    assert restored_placement.candidates() == [state_a | state_b] * 2

    restored_placement.copy(backup, restored_placement.path)
    # The sequence went back: the feed says so; the caches, which take a
    # sequence behind them for a read that started earlier, do not.
    assert (
        "ahead of this database (at %s)" % at_a
        in gone(restored_placement.workers[1], at_b)["detail"]
    )
    assert restored_placement.candidates() == [state_a | state_b] * 2

    assert main(["db", "mark-restored", *restored_placement.args]) == 0
    slot, seq = (int(x) for x in at_a.split(":"))
    marked = "%d:%d" % (slot, seq + 2**32)
    assert "change sequence moved on to %s:" % marked in capsys.readouterr().out
    assert restored_placement.candidates() == [state_a] * 2
    # Numbers go on from there; every position handed out before is
    # older than the history kept, even once new writes pass it.
    state_c = {restored_placement.provider("c")}
    assert restored_placement.candidates() == [state_a | state_c] * 2
    for old in (at_a, at_b):
        assert gone(restored_placement.workers[0], old)["oldest_position"] == marked
    resp = restored_placement.workers[1].get("/berth/changes", params={"after": marked})
    assert [e["kind"] for e in resp.json()["events"]] == [
        events.PROVIDER_CREATED,
        events.INVENTORIES_SET,
    ]
