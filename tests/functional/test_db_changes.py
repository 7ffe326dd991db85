"""The change numbers the candidate caches read (``berth.db.changes``):
each write that notes a change is numbered once, a failed one not at all;
a gap, a global change or too many providers mean "reload everything";
slots (Galera nodes) number their writes apart; a lost counter row is
made again past the numbers left behind.
"""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from berth.db import changes
from berth.db import tables as t
from berth.db.engine import Database


def _seq_rows(db: Database) -> list[tuple[int, str, int | None]]:
    ch = t.berth_changes
    with db.engine.connect() as conn:
        return [
            tuple(r)
            for r in conn.execute(  # type: ignore[misc]
                sa.select(ch.c.seq, ch.c.kind, ch.c.resource_provider_id).order_by(ch.c.id)
            )
        ]


def _at(db: Database, n: int) -> changes.Position:
    """Position ``n`` of the one slot a single server writes."""
    return changes.Position.of({db.read(changes.slot): n})


def test_flush_numbers_each_write_once(db: Database) -> None:
    start = db.read(changes.current).total

    def write(conn: Any) -> None:
        changes.note(conn, changes.USAGE, [7, 8])
        changes.note(conn, changes.STRUCTURE, [8])

    db.run(write)
    db.run(lambda conn: None)  # noted nothing: no new number
    assert db.read(changes.current) == _at(db, start + 1)
    rows = [r for r in _seq_rows(db) if r[0] > start]
    assert sorted(rows) == [(start + 1, "s", 8), (start + 1, "u", 7), (start + 1, "u", 8)]
    found = db.read(lambda conn: changes.since(conn, _at(db, start), _at(db, start + 1)))
    assert not found.everything
    assert found.structure == {8} and found.usage == {7, 8}


def test_failed_write_leaves_no_number(db: Database) -> None:
    start = db.read(changes.current)

    def fail(conn: Any) -> None:
        changes.note(conn, changes.STRUCTURE, [1])
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        db.run(fail)
    db.run(lambda conn: None)
    assert db.read(changes.current) == start


def test_gaps_and_global_changes_mean_everything(db: Database) -> None:
    start = db.read(changes.current).total
    db.run(lambda conn: changes.note(conn, changes.USAGE, [1]))
    db.run(lambda conn: changes.note(conn, changes.USAGE, [2]))
    with db.engine.begin() as conn:  # as if pruned
        conn.execute(t.berth_changes.delete().where(t.berth_changes.c.seq == start + 1))
    assert db.read(lambda c: changes.since(c, _at(db, start), _at(db, start + 2))).everything
    assert not db.read(
        lambda c: changes.since(c, _at(db, start + 1), _at(db, start + 2))
    ).everything
    db.run(lambda conn: changes.note(conn, changes.STRUCTURE))
    assert db.read(lambda c: changes.since(c, _at(db, start + 1), _at(db, start + 3))).everything


def test_many_providers_collapse_to_one_row(db: Database) -> None:
    start = db.read(changes.current).total
    db.run(lambda conn: changes.note(conn, changes.USAGE, range(changes.MAX_ROWS + 1)))
    rows = [r for r in _seq_rows(db) if r[0] > start]
    assert rows == [(start + 1, "u", None)]
    assert db.read(lambda c: changes.since(c, _at(db, start), _at(db, start + 1))).everything


def test_slots_are_numbered_and_read_apart(db: Database) -> None:
    """Two slots (two Galera nodes) number their writes independently; a
    reader's position covers another only slot by slot, and ``since``
    lists the changes of every slot that moved."""

    def write_as(slot: int, provider: int) -> None:
        def work(conn: Any) -> None:
            conn.info["berth.changes.slot"] = slot
            changes.note(conn, changes.USAGE, [provider])

        try:
            db.run(work)
        finally:
            db.engine.dispose()  # the pooled connection forgets the slot

    home = db.read(changes.slot)
    start = db.read(changes.current)
    write_as(900, 1)
    write_as(901, 2)
    write_as(900, 3)
    now = db.read(changes.current)
    assert now.get(900) == 2 and now.get(901) == 1
    assert now.get(home) == start.get(home)
    assert now >= start and not start >= now
    one_ahead = changes.Position.of({**dict(now.seqs), 901: 0})
    assert now >= one_ahead and not one_ahead >= now
    found = db.read(lambda c: changes.since(c, start, now))
    assert not found.everything and found.usage == {1, 2, 3}
    found = db.read(lambda c: changes.since(c, one_ahead, now))
    assert found.usage == {2}
    # A gap in one slot is a gap.
    with db.engine.begin() as conn:
        conn.execute(
            t.berth_changes.delete().where(
                t.berth_changes.c.slot == 900, t.berth_changes.c.seq == 1
            )
        )
    assert db.read(lambda c: changes.since(c, start, now)).everything


# Interleavings that only READ COMMITTED allows (PostgreSQL, MariaDB): on
def test_missing_counter_row_is_recreated(db: Database) -> None:
    """A database whose counter row is gone (not built by db sync) still
    takes writes, numbered past the change rows left behind (a cache that
    saw the old numbers must not take itself for newer)."""
    db.run(lambda conn: changes.note(conn, changes.USAGE, [1]))
    last = db.read(changes.current).get(db.read(changes.slot))
    with db.engine.begin() as conn:
        conn.execute(t.berth_state.delete())
    assert db.read(changes.current) == changes.Position()
    db.run(lambda conn: changes.note(conn, changes.USAGE, [1]))
    db.run(lambda conn: changes.note(conn, changes.USAGE, [2]))
    assert db.read(changes.current) == _at(db, last + 2)
    assert not db.read(lambda c: changes.since(c, _at(db, last), _at(db, last + 2))).everything
