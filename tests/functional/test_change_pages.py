"""Reading the change feed page by page across several slots (Galera keeps
one change-sequence slot per node): pages must hand the events over in
the same order as one read of everything, with no gap and nothing twice,
even where a page's limit cuts one slot long before another.

The slots are made by hand here (``berth_state`` rows of slots no server
numbers, and event rows with chosen commit times; removed after each
test), so this runs on every backend; the Galera walk itself is a
stress test.
"""

from __future__ import annotations

import random

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import events
from berth.db import tables as t
from berth.db.engine import Database
from berth.position import Position
from tests.functional.conftest import SLOTS


def _write_log(db: Database, rng: random.Random, writes: int) -> None:
    """``writes`` writes spread over the slots at random, each of one to
    three events, committed at increasing times; each slot's counter is
    left at its newest number."""

    def work(conn: Connection) -> None:
        newest = dict.fromkeys(SLOTS, 0)
        rows = []
        for n in range(writes):
            slot = rng.choice(SLOTS)
            newest[slot] += 1
            for idx in range(rng.randint(1, 3)):
                rows.append(
                    {
                        "slot": slot,
                        "seq": newest[slot],
                        "idx": idx,
                        "kind": events.TRAIT_CREATED,
                        "subject": "CUSTOM_W%d_%d" % (n, idx),
                        "tree": None,
                        "project": None,
                        "created_at": 1000.0 + n,
                        "body": orjson.dumps({"new": None, "old": None}).decode(),
                    }
                )
        conn.execute(t.berth_events.insert(), rows)
        conn.execute(
            t.berth_state.insert(),
            [{"id": slot, "seq": seq, "pruned": 0} for slot, seq in newest.items()],
        )

    db.run(work)


def _paged(
    db: Database,
    before_slots: Position,
    limit: int,
    wanted: events.Filters = events.Filters(),
) -> list[tuple[int, int, int]]:
    """Every event after ``start``, read ``limit`` at a time, as
    (slot, seq, idx) in the order the pages gave them."""
    after = before_slots
    got: list[tuple[int, int, int]] = []
    for _ in range(10_000):
        page = db.read(lambda conn, at=after: events.read(conn, at, wanted, limit))
        got += [(e.slot, e.seq, e.idx) for e in page.events]
        assert page.upto >= after
        after = page.upto
        if not page.more:
            return got
    raise AssertionError("the pages never ended")


def test_pages_across_slots_keep_the_order_of_one_read(
    db: Database, before_slots: Position
) -> None:
    rng = random.Random(7)
    _write_log(db, rng, 120)
    whole = _paged(db, before_slots, 10_000)
    assert len(whole) == len(set(whole))
    assert len({slot for slot, _, _ in whole}) == len(SLOTS)
    for limit in (1, 2, 5, 7, 20):
        assert _paged(db, before_slots, limit) == whole, limit


def test_filtered_pages_across_slots_miss_nothing(db: Database, before_slots: Position) -> None:
    """With a filter, slots skip numbers; pages still give exactly the
    matching events of one read, in its order."""
    rng = random.Random(11)
    _write_log(db, rng, 90)

    def matching(conn: Connection) -> None:
        ev = t.berth_events
        conn.execute(
            sa.update(ev)
            .where(ev.c.slot.in_(SLOTS), ev.c.idx == 1)
            .values(kind=events.TRAIT_DELETED)
        )

    db.run(matching)
    wanted = events.Filters(kinds=frozenset([events.TRAIT_DELETED]))
    want = _paged(db, before_slots, 10_000, wanted)
    assert want and all(idx == 1 for _, _, idx in want)
    for limit in (1, 3):
        assert _paged(db, before_slots, limit, wanted) == want, limit
