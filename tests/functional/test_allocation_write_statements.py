"""Allocation writes: the statements each sends, and the consumer lock
they keep (``berth.domain.allocation``).

A write reads every consumer it names, with what each holds, in its
first statement; ``DELETE /allocations/{c}`` takes the consumer's lock
by deleting the row it read, at the generation it read, and falls back
to locking and reading again when that row changed meanwhile. These
tests pin the statement counts and check that the usages and the
change feed stay true through the races that fallback is for.
"""

from __future__ import annotations

import threading
import uuid as uuidlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import sqlalchemy as sa

from berth.db import tables as t
from berth.db.engine import Database
from berth.domain import allocation, consumer
from berth.domain.allocation import ConsumerAllocations
from support.allocation_setup import PROJECT, USER, body, make_provider
from tests.conftest import Client
from tests.functional.test_change import feed, position


def new() -> str:
    return str(uuidlib.uuid4())


#: Statements a write sends now and then, whatever it writes: the feed's
#: pruning (every 512th change number of a slot) and MariaDB's one look
#: per connection at whether it is a Galera node.
_NOW_AND_THEN = ("DELETE FROM berth_changes", "DELETE FROM berth_events", "SHOW ")


@contextmanager
def counted(db: Database) -> Iterator[list[str]]:
    """The statements sent to the database inside the block."""
    sent: list[str] = []

    def note(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if not statement.lstrip().startswith(_NOW_AND_THEN):
            sent.append(statement)

    sa.event.listen(db.engine, "before_cursor_execute", note)
    try:
        yield sent
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", note)


def put(
    client: Client, consumer_uuid: str, allocs: dict[str, dict[str, int]], gen: int | None = None
) -> None:
    resp = client.put("/allocations/" + consumer_uuid, json=body(allocs, gen, ctype="INSTANCE"))
    assert resp.status_code == 204, resp.text


def check_usages(client: Client, db: Database, *providers: str) -> None:
    """Every usage the API shows (per provider, and the project's, kept
    up to date by the writes' notes) is the sum of the allocations."""
    a, rp, rc = t.allocations, t.resource_providers, t.resource_classes

    def sums(conn: Any) -> list[Any]:
        return conn.execute(
            sa.select(rp.c.uuid, rc.c.name, sa.func.sum(a.c.used))
            .select_from(
                a.join(rp, rp.c.id == a.c.resource_provider_id).join(
                    rc, rc.c.id == a.c.resource_class_id
                )
            )
            .group_by(rp.c.uuid, rc.c.name)
        ).all()

    rows = db.read(sums)
    for uuid in providers:
        want = {name: int(used) for rp_uuid, name, used in rows if rp_uuid == uuid}
        got = client.get("/resource_providers/%s/usages" % uuid).json()
        assert {k: v for k, v in got["usages"].items() if v} == want
    total: dict[str, int] = {}
    for _, name, used in rows:
        total[name] = total.get(name, 0) + int(used)
    got = client.at("1.9").get("/usages", params={"project_id": PROJECT}).json()
    assert {k: v for k, v in got["usages"].items() if v} == total


def rewrite(consumer_uuid: str, allocs: dict[str, dict[str, int]]) -> Callable[[Any], None]:
    """A write, in the caller's transaction, of ``allocs`` (empty:
    none) as the consumer's allocations at its generation 1."""

    def write(conn: Any) -> None:
        allocation.replace_allocations(
            conn,
            [ConsumerAllocations(consumer_uuid, allocs, PROJECT, USER, 1, check_generation=True)],
        )

    return write


def held(db: Database, consumer_uuid: str) -> tuple[int, bool]:
    """How many allocation rows carry ``consumer_uuid``, and whether its
    consumer row exists."""
    a, c = t.allocations, t.consumers

    def work(conn: Any) -> tuple[int, bool]:
        rows = conn.scalar(
            sa.select(sa.func.count()).select_from(a).where(a.c.consumer_id == consumer_uuid)
        )
        row = conn.scalar(sa.select(c.c.id).where(c.c.uuid == consumer_uuid))
        return int(rows), row is not None

    return db.read(work)


# -- statements per write ----------------------------------------------------

#: Statements per write, by backend. The first read gives every
#: consumer with what it holds (a move and a POST of two consumers sent
#: one and two more before), new consumers are inserted in one
#: statement and existing ones taken in one (a POST of two new ones sent
#: one more before), and a DELETE's lock is its DELETE of the consumer
#: row (one more before). The change sequence's flush is 3
#: statements on SQLite, 1 on PostgreSQL and 4 on MariaDB, which also
#: bumps provider generations one UPDATE each and reads them after
#: (``claim.lock_providers``).
EXPECTED = {
    "sqlite": {"claim": 8, "move": 9, "post": 8, "delete": 6},
    "postgresql": {"claim": 6, "move": 7, "post": 6, "delete": 4},
    "mysql": {"claim": 11, "move": 11, "post": 11, "delete": 7},
}


def test_statements_per_write(client: Client, db: Database, backend: str) -> None:
    a = make_provider(db, "a", VCPU=16, MEMORY_MB=4096)
    b = make_provider(db, "b", VCPU=16, MEMORY_MB=4096)
    disk = make_provider(db, "disk", DISK_GB=100)
    put(client, new(), {a: {"VCPU": 1}})  # the owner rows exist
    moved, first, second = new(), new(), new()
    got = {}
    with counted(db) as sent:
        put(client, moved, {a: {"VCPU": 2, "MEMORY_MB": 256}, disk: {"DISK_GB": 10}})
    got["claim"] = len(sent)
    check_usages(client, db, a, b, disk)
    with counted(db) as sent:
        put(client, moved, {b: {"VCPU": 2, "MEMORY_MB": 256}}, gen=1)
    got["move"] = len(sent)
    check_usages(client, db, a, b, disk)
    with counted(db) as sent:
        resp = client.post(
            "/allocations",
            json={
                first: body({a: {"VCPU": 1}}, ctype="INSTANCE"),
                second: body({b: {"VCPU": 1}}, ctype="INSTANCE"),
            },
        )
        assert resp.status_code == 204, resp.text
    got["post"] = len(sent)
    check_usages(client, db, a, b, disk)
    with counted(db) as sent:
        assert client.delete("/allocations/" + moved).status_code == 204
    got["delete"] = len(sent)
    check_usages(client, db, a, b, disk)
    assert got == EXPECTED[backend]
    assert held(db, moved) == (0, False)


def test_delete_of_a_consumer_holding_nothing_is_one_read(client: Client, db: Database) -> None:
    with counted(db) as sent:
        resp = client.delete("/allocations/" + new())
    assert resp.status_code == 404
    assert len(sent) == 1


def _move_all(client: Client, consumers: list[str], to: str) -> int:
    """POST /allocations moving each of ``consumers`` (at generation 1)
    to provider ``to``; the status."""
    return client.post(
        "/allocations", json={c: body({to: {"VCPU": 1}}, 1, ctype="INSTANCE") for c in consumers}
    ).status_code


def _generations(db: Database, consumers: list[str]) -> list[int]:
    c = t.consumers
    return db.read(
        lambda conn: [
            int(g)
            for g in conn.scalars(
                sa.select(c.c.generation).where(c.c.uuid.in_(consumers)).order_by(c.c.uuid)
            )
        ]
    )


def test_moving_many_consumers_takes_them_in_one_statement(
    client: Client, db: Database, backend: str
) -> None:
    """The existing consumers' generations move in one statement
    (``executemany``), so a POST moving six sends what one moving two
    does."""
    a = make_provider(db, "a", VCPU=16)
    b = make_provider(db, "b", VCPU=16)
    few, many = [new() for _ in range(2)], [new() for _ in range(6)]
    for c in few + many:
        put(client, c, {a: {"VCPU": 1}})
    sent = {}
    for name, consumers in (("few", few), ("many", many)):
        with counted(db) as statements:
            assert _move_all(client, consumers, b) == 204
        sent[name] = len(statements)
        assert _generations(db, consumers) == [2] * len(consumers)
    assert sent["few"] == sent["many"]
    check_usages(client, db, a, b)
    got = client.get("/resource_providers/%s/usages" % b).json()
    assert got["usages"]["VCPU"] == 8


def test_creating_many_consumers_is_one_statement(client: Client, db: Database) -> None:
    a = make_provider(db, "a", VCPU=16)
    put(client, new(), {a: {"VCPU": 1}})  # the owner rows exist
    sent = {}
    for name, count in (("few", 2), ("many", 6)):
        consumers = [new() for _ in range(count)]
        with counted(db) as statements:
            resp = client.post(
                "/allocations",
                json={c: body({a: {"VCPU": 1}}, ctype="INSTANCE") for c in consumers},
            )
            assert resp.status_code == 204, resp.text
        sent[name] = len(statements)
        assert _generations(db, consumers) == [1] * count
    assert sent["few"] == sent["many"]
    check_usages(client, db, a)


def test_one_consumer_created_meanwhile_fails_the_whole_post(
    client: Client, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One of three new consumers is inserted by someone else between the
    write's read and its insert (in the same transaction): 409, and none
    of the three exists after."""
    a = make_provider(db, "a", VCPU=16)
    put(client, new(), {a: {"VCPU": 1}})
    consumers = sorted(new() for _ in range(3))
    original = consumer.create_all

    def meanwhile(conn: Any, rows: list[tuple[str, consumer.Owner]]) -> None:
        uuid, (project, user, type_id) = rows[1]
        consumer.create(conn, uuid, project, user, type_id)
        original(conn, rows)

    monkeypatch.setattr(consumer, "create_all", meanwhile)
    resp = client.post(
        "/allocations", json={c: body({a: {"VCPU": 1}}, ctype="INSTANCE") for c in consumers}
    )
    assert resp.status_code == 409, resp.text
    assert resp.json()["errors"][0]["code"] == "placement.concurrent_update"
    assert [held(db, c) for c in consumers] == [(0, False)] * 3
    check_usages(client, db, a)


def test_one_consumer_moved_meanwhile_fails_the_whole_post(
    client: Client, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The middle one of three consumers gets a new generation between
    the write's read and its compare-and-swap (in the same transaction,
    so on every backend): 409, and nothing the POST asked for is done."""
    a = make_provider(db, "a", VCPU=16)
    b = make_provider(db, "b", VCPU=16)
    consumers = sorted(new() for _ in range(3))
    for c in consumers:
        put(client, c, {a: {"VCPU": 1}})
    original = consumer.bump_generations

    def meanwhile(conn: Any, taken: list[consumer.Consumer]) -> None:
        conn.execute(
            t.consumers.update()
            .where(t.consumers.c.uuid == consumers[1])
            .values(generation=t.consumers.c.generation + 1)
        )
        original(conn, taken)

    monkeypatch.setattr(consumer, "bump_generations", meanwhile)
    resp = client.post(
        "/allocations", json={c: body({b: {"VCPU": 1}}, 1, ctype="INSTANCE") for c in consumers}
    )
    assert resp.status_code == 409, resp.text
    assert resp.json()["errors"][0]["code"] == "placement.concurrent_update"
    monkeypatch.setattr(consumer, "bump_generations", original)
    assert _generations(db, consumers) == [1, 1, 1]
    for c in consumers:
        got = client.get("/allocations/" + c).json()["allocations"]
        assert list(got) == [a] and got[a]["resources"] == {"VCPU": 1}
    check_usages(client, db, a, b)
    assert "VCPU" not in {
        k for k, v in client.get("/resource_providers/%s/usages" % b).json()["usages"].items() if v
    }


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
