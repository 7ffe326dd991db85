"""Allocation writes: the statements each sends (``berth.domain.allocation``).

A write reads every consumer it names, with what each holds, in its
first statement; new consumers are inserted in one statement and existing
ones taken in one. These tests pin the statement counts per backend and
check that the usages stay true; a POST of many consumers fails whole when
one changed meanwhile. The consumer lock of ``DELETE /allocations/{c}``:
test_allocation_write_consumer_lock.py.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import pytest
import sqlalchemy as sa

from berth.db import tables as t
from berth.db.engine import Database
from berth.domain import consumer
from support.allocation_setup import body, make_provider
from support.allocation_writes import check_usages, held, new, put
from support.statements import sent
from tests.conftest import Client

#: Statements a write sends now and then, whatever it writes: the feed's
#: pruning (every 512th change number of a slot) and MariaDB's one look
#: per connection at whether it is a Galera node.
_NOW_AND_THEN = ("DELETE FROM berth_changes", "DELETE FROM berth_events", "SHOW ")


def counted(db: Database) -> AbstractContextManager[list[str]]:
    """The statements sent to the database inside the block."""
    return sent(db, lambda statement: not statement.lstrip().startswith(_NOW_AND_THEN))


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
