"""Allocation writes: the consumer lock they keep (``berth.domain.allocation``,
``berth.domain.consumer``).

``DELETE /allocations/{c}`` takes the consumer's lock by deleting the row
it read, at the generation it read, and falls back to locking and reading
again when that row changed meanwhile. These tests check that the usages
and the change feed stay true through the races that fallback is for:
changes made in the same transaction (every backend), and real races of
two transactions (PostgreSQL and MariaDB). The statements each write
sends: test_allocation_write_statements.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
import sqlalchemy as sa

from berth.db import tables as t
from berth.db.engine import Database
from berth.domain import allocation, consumer
from berth.domain.allocation import ConsumerAllocations
from support.allocation_setup import PROJECT, USER, make_provider
from support.allocation_writes import check_usages, held, new, put
from support.change_feed import feed, position
from tests.conftest import Client


def rewrite(consumer_uuid: str, allocs: dict[str, dict[str, int]]) -> Callable[[Any], None]:
    """A write, in the caller's transaction, of ``allocs`` (empty:
    none) as the consumer's allocations at its generation 1."""

    def write(conn: Any) -> None:
        allocation.replace_allocations(
            conn,
            [ConsumerAllocations(consumer_uuid, allocs, PROJECT, USER, 1, check_generation=True)],
        )

    return write


# -- DELETE whose consumer changed after its first read ------------------------


def _before_the_lock(
    monkeypatch: pytest.MonkeyPatch, meanwhile: Callable[[Any], None]
) -> list[bool]:
    """Run ``meanwhile(conn)`` when a DELETE has read its consumer and
    is about to take its lock; what each try to take it answered."""
    answers: list[bool] = []
    original = consumer.delete_unchanged

    def wrapped(conn: Any, current: consumer.Consumer) -> bool:
        if not answers:
            meanwhile(conn)
        answers.append(original(conn, current))
        return answers[-1]

    monkeypatch.setattr(consumer, "delete_unchanged", wrapped)
    return answers


def test_delete_falls_back_when_the_consumer_moved_in_between(
    client: Client, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The consumer's allocations are replaced (in the same transaction,
    so on every backend) between the DELETE's read and its lock: the
    DELETE takes the lock the other way and removes the new ones, and
    the usages and the feed's old value follow them."""
    a = make_provider(db, "a", VCPU=8)
    b = make_provider(db, "b", VCPU=8)
    c = new()
    put(client, c, {a: {"VCPU": 3}})
    start = position(client)
    answers = _before_the_lock(monkeypatch, rewrite(c, {b: {"VCPU": 5}}))
    assert client.delete("/allocations/" + c).status_code == 204
    assert answers == [False]
    assert held(db, c) == (0, False)
    check_usages(client, db, a, b)
    events = feed(client, start, consumer=c)
    assert [e["kind"] for e in events] == ["allocations.replaced", "allocations.removed"]
    assert events[1]["old"]["allocations"] == {b: {"VCPU": 5}}


def test_delete_falls_back_when_the_consumer_was_deleted_in_between(
    client: Client, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = make_provider(db, "a", VCPU=8)
    c = new()
    put(client, c, {a: {"VCPU": 3}})
    answers = _before_the_lock(monkeypatch, rewrite(c, {}))
    resp = client.delete("/allocations/" + c)
    assert resp.status_code == 404
    assert answers == [False]
    # The 404 rolled the whole transaction back: the consumer holds
    # what it held.
    assert held(db, c) == (1, True)
    check_usages(client, db, a)


def test_delete_of_an_unchanged_consumer_takes_its_lock_at_once(
    client: Client, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    a = make_provider(db, "a", VCPU=8)
    c = new()
    put(client, c, {a: {"VCPU": 3}})
    start = position(client)
    answers = _before_the_lock(monkeypatch, lambda conn: None)
    assert client.delete("/allocations/" + c).status_code == 204
    assert answers == [True]
    assert held(db, c) == (0, False)
    check_usages(client, db, a)
    [event] = feed(client, start, consumer=c)
    assert event["kind"] == "allocations.removed"
    assert event["old"] == {
        "allocations": {a: {"VCPU": 3}},
        "project_id": PROJECT,
        "user_id": USER,
        "consumer_type": "INSTANCE",
    }


def test_delete_of_allocations_without_a_consumer_row(client: Client, db: Database) -> None:
    """Legacy allocations (no consumer row) have no generation to take
    the lock at: the DELETE takes the locking path and removes them."""
    a = make_provider(db, "a", VCPU=8)
    c = new()
    put(client, c, {a: {"VCPU": 3}})
    db.run(lambda conn: conn.execute(t.consumers.delete().where(t.consumers.c.uuid == c)))
    assert client.delete("/allocations/" + c).status_code == 204
    assert held(db, c) == (0, False)


# -- real races: two transactions (PostgreSQL and MariaDB) --------------------


def _blocked(db: Database) -> bool:
    """Whether another transaction on this test's database waits for a
    lock (on MariaDB: runs a statement on the consumers table, which
    only a waiting DELETE still does; its wait does not show in
    ``innodb_trx`` before it has written)."""
    if db.backend == "postgresql":
        query = (
            "SELECT count(*) FROM pg_stat_activity WHERE datname = "
            "current_database() AND wait_event_type = 'Lock'"
        )
    else:
        query = (
            "SELECT count(*) FROM information_schema.processlist "
            "WHERE db = DATABASE() AND id <> CONNECTION_ID() AND "
            "command = 'Query' AND info LIKE '%consumers%'"
        )
    with db.engine.connect() as conn:
        return bool(conn.scalar(sa.text(query)))


def _wait_until_blocked(db: Database) -> None:
    done = threading.Event()
    for _ in range(400):
        if _blocked(db):
            return
        done.wait(0.025)
    raise AssertionError("the DELETE never waited for the writer's lock")


def _race(
    client: Client, db: Database, consumer_uuid: str, first: Callable[[Any], None], commit: bool
) -> int:
    """Run ``first`` in a transaction left open; start a DELETE of
    ``consumer_uuid``, let it block on the lock, then commit (or roll
    back) the first. The DELETE's status."""
    written, release = threading.Event(), threading.Event()

    class Rollback(Exception):
        pass

    def writer() -> None:
        def work(conn: Any) -> None:
            first(conn)
            written.set()
            release.wait(30)
            if not commit:
                raise Rollback

        try:
            db.run(work)
        except Rollback:
            pass

    status: list[int] = []
    holder = threading.Thread(target=writer)
    holder.start()
    try:
        assert written.wait(30)
        deleter = threading.Thread(
            target=lambda: status.append(client.delete("/allocations/" + consumer_uuid).status_code)
        )
        deleter.start()
        _wait_until_blocked(db)
    finally:
        release.set()
        holder.join(30)
    deleter.join(30)
    assert len(status) == 1
    return status[0]


@pytest.mark.usefixtures("skip_sqlite")
@pytest.mark.parametrize("commit", [True, False])
def test_delete_racing_an_uncommitted_replace(client: Client, db: Database, commit: bool) -> None:
    """The DELETE reads the old allocations, then waits for the writer
    replacing them. Committed: it deletes the new allocations, all of
    them (as when it locked first); rolled back: the old ones."""
    a = make_provider(db, "a", VCPU=8)
    b = make_provider(db, "b", VCPU=8)
    c = new()
    put(client, c, {a: {"VCPU": 3}})
    start = position(client)
    move = rewrite(c, {a: {"VCPU": 1}, b: {"VCPU": 5}})
    assert _race(client, db, c, move, commit) == 204
    assert held(db, c) == (0, False)
    check_usages(client, db, a, b)
    events = feed(client, start, consumer=c)
    if commit:
        assert [e["kind"] for e in events] == ["allocations.replaced", "allocations.removed"]
        assert events[1]["old"]["allocations"] == {a: {"VCPU": 1}, b: {"VCPU": 5}}
    else:
        [removed] = events
        assert removed["old"]["allocations"] == {a: {"VCPU": 3}}


@pytest.mark.usefixtures("skip_sqlite")
def test_delete_racing_an_uncommitted_emptying(client: Client, db: Database) -> None:
    """The writer empties the consumer (and deletes its row): the DELETE
    then finds nothing to remove (404), and nothing is removed twice."""
    a = make_provider(db, "a", VCPU=8)
    c = new()
    put(client, c, {a: {"VCPU": 3}})
    assert _race(client, db, c, rewrite(c, {}), commit=True) == 404
    assert held(db, c) == (0, False)
    check_usages(client, db, a)


@pytest.mark.usefixtures("skip_sqlite")
def test_delete_removes_a_replace_committed_after_its_read(
    client: Client, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A replace that commits between the DELETE's read and its lock
    (another transaction): the DELETE removes what it wrote."""
    a = make_provider(db, "a", VCPU=8)
    b = make_provider(db, "b", VCPU=8)
    c = new()
    put(client, c, {a: {"VCPU": 3}})

    def elsewhere(conn: Any) -> None:
        done = threading.Thread(target=db.run, args=(rewrite(c, {b: {"VCPU": 4}}),))
        done.start()
        done.join(30)

    answers = _before_the_lock(monkeypatch, elsewhere)
    assert client.delete("/allocations/" + c).status_code == 204
    assert answers == [False]
    assert held(db, c) == (0, False)
    check_usages(client, db, a, b)
