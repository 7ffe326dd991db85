"""Tree writes racing each other on a real database: creating children
under a provider that another transaction deletes, and two providers
moved under each other at once.

Each writer runs in its own thread and transaction (``Database.run``, as
a request does). Whatever interleaving the database allows, the tree
rules must hold when the dust settles: no provider whose parent is gone,
every provider's root is its parent's root, and no loop.

Covers ``berth.domain.resource_provider``'s tree lock (``lock_tree``).
"""

from __future__ import annotations

import threading
import uuid as uuidlib
from collections.abc import Callable

import pytest
import sqlalchemy as sa

from berth.db import tables as t
from berth.db.engine import Database
from berth.domain import errors
from berth.domain import resource_provider as rp

pytestmark = pytest.mark.stress

ROUNDS = 15


def _uuid() -> str:
    return str(uuidlib.uuid4())


def _race(*steps: Callable[[], None]) -> list[BaseException]:
    """Run ``steps`` at once, one thread each; the domain errors they
    raised (refusals, not failures)."""
    refused: list[BaseException] = []
    barrier = threading.Barrier(len(steps))

    def run(step: Callable[[], None]) -> None:
        barrier.wait()
        try:
            step()
        except (
            errors.NotFound,
            errors.BadRequest,
            errors.ConcurrentUpdate,
            errors.CannotDeleteParent,
        ) as exc:
            refused.append(exc)

    threads = [threading.Thread(target=run, args=(s,)) for s in steps]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return refused


def _check_trees(db: Database) -> None:
    """Every parent exists, every root is its parent's root, no loops."""
    RP = t.resource_providers
    rows = db.read(
        lambda conn: conn.execute(
            sa.select(RP.c.id, RP.c.parent_provider_id, RP.c.root_provider_id)
        ).all()
    )
    parent = {r.id: r.parent_provider_id for r in rows}
    root = {r.id: r.root_provider_id for r in rows}
    for pid in parent:
        seen = {pid}
        up = parent[pid]
        if up is None:
            assert root[pid] == pid
            continue
        assert up in parent, "provider %d's parent %d is gone" % (pid, up)
        assert root[pid] == root[up]
        while up is not None:
            assert up not in seen, "loop through %d" % up
            seen.add(up)
            up = parent[up]


def _create(db: Database, name: str, uuid: str, parent: str | None = None) -> Callable[[], None]:
    def step() -> None:
        db.run(lambda conn: rp.create_provider(conn, name, uuid, parent))

    return step


def _children_against_delete(db: Database, n: int) -> None:
    host = _uuid()
    _create(db, "host-%d" % n, host)()
    children = [_uuid(), _uuid()]
    refused = _race(
        _create(db, "child-%d-0" % n, children[0], host),
        _create(db, "child-%d-1" % n, children[1], host),
        lambda: db.run(lambda conn: rp.delete_provider(conn, host)),
    )
    made = [c for c in children if db.read(lambda conn, c=c: rp.get_provider(conn, c))]
    exists = db.read(lambda conn: rp.get_provider(conn, host)) is not None
    # Either the delete went first (every child refused) or some child
    # won (the delete refused: the host has children).
    assert exists == bool(made)
    assert len(refused) == 3 - len(made) - (0 if exists else 1)
    _check_trees(db)


def test_children_created_while_their_parent_is_deleted(db: Database) -> None:
    for n in range(ROUNDS):
        _children_against_delete(db, n)


def _moves_into_each_other(db: Database, n: int) -> None:
    a, b = _uuid(), _uuid()
    _create(db, "a-%d" % n, a)()
    _create(db, "b-%d" % n, b)()

    def move(mover: str, name: str, parent: str) -> Callable[[], None]:
        return lambda: db.run(
            lambda conn: rp.update_provider(conn, mover, name, parent, allow_reparenting=True)
        )

    refused = _race(move(a, "a-%d" % n, b), move(b, "b-%d" % n, a))
    # At most one move may win: both would make a loop.
    assert len(refused) >= 1
    _check_trees(db)


def test_two_providers_moved_under_each_other(db: Database) -> None:
    for n in range(ROUNDS):
        _moves_into_each_other(db, n)
