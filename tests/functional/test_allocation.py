"""Allocations over HTTP: capacity rules, generations, POST moves."""

from __future__ import annotations

import threading
import uuid as uuidlib
from typing import Any

import pytest
import sqlalchemy as sa

from berth.api import errors as api_errors
from berth.db import tables as t
from berth.db.engine import Database
from berth.domain import allocation, claim, errors
from berth.domain.allocation import ConsumerAllocations
from support.allocation_setup import PROJECT, USER, body, generation, make_provider
from tests.conftest import Client

V = "1.37"  # newest version without the required consumer_type


def new() -> str:
    return str(uuidlib.uuid4())


def put(
    client: Client,
    consumer: str,
    allocs: dict[str, dict[str, int]],
    gen: Any = None,
    version: str = V,
) -> Any:
    return client.at(version).put("/allocations/" + consumer, json=body(allocs, gen))


def detail(resp: Any) -> str:
    return str(resp.json()["errors"][0]["detail"])


def code(resp: Any) -> str:
    return str(resp.json()["errors"][0]["code"])


def test_capacity_uses_reserved_and_ratio(client: Client, db: Database) -> None:
    rp = make_provider(
        db, "cn", VCPU={"total": 10, "reserved": 2, "allocation_ratio": 1.5, "max_unit": 100}
    )
    assert put(client, new(), {rp: {"VCPU": 12}}).status_code == 204
    resp = put(client, new(), {rp: {"VCPU": 1}})
    assert resp.status_code == 409
    assert code(resp) == "placement.undefined_code"
    assert (
        "Unable to allocate inventory: Unable to create allocation for "
        "'VCPU' on resource provider '%s'. The requested amount would "
        "exceed the capacity." % rp
    ) in detail(resp)


@pytest.mark.parametrize("amount", [1, 9, 5])
def test_unit_constraints(client: Client, db: Database, amount: int) -> None:
    rp = make_provider(
        db, "cn", DISK_GB={"total": 100, "min_unit": 2, "max_unit": 8, "step_size": 2}
    )
    resp = put(client, new(), {rp: {"DISK_GB": amount}})
    assert resp.status_code == 409
    assert "would violate inventory constraints" in detail(resp)
    assert put(client, new(), {rp: {"DISK_GB": 8}}).status_code == 204


def test_sum_within_one_request_counts(client: Client, db: Database) -> None:
    a = make_provider(db, "a", VCPU=4)
    first, second = new(), new()
    resp = client.post(
        "/allocations",
        json={
            first: body({a: {"VCPU": 3}}, ctype="INSTANCE"),
            second: body({a: {"VCPU": 2}}, ctype="INSTANCE"),
        },
    )
    assert resp.status_code == 409
    assert "exceed the capacity" in detail(resp)
    assert client.get("/allocations/" + first).json() == {"allocations": {}}


def test_missing_inventory_unknown_class_unknown_provider(client: Client, db: Database) -> None:
    rp = make_provider(db, "cn", VCPU=4)
    bare = make_provider(db, "bare")
    consumer = new()
    resp = put(client, consumer, {rp: {"DISK_GB": 1}})
    assert resp.status_code == 409
    assert ("Inventory for 'DISK_GB' on resource provider '%s' invalid." % rp) in detail(resp)
    resp = put(client, consumer, {bare: {"VCPU": 1, "DISK_GB": 1}})
    assert resp.status_code == 409
    assert ("Inventory for 'VCPU, DISK_GB' on resource provider '%s' invalid." % bare) in detail(
        resp
    )
    resp = put(client, consumer, {rp: {"CUSTOM_NOPE": 1}})
    assert resp.status_code == 400
    assert (
        "Unable to allocate inventory for consumer %s: No such resource "
        "class CUSTOM_NOPE." % consumer
    ) in detail(resp)
    ghost = new()
    resp = put(client, consumer, {ghost: {"VCPU": 1}})
    assert resp.status_code == 400
    assert ("Allocation for resource provider '%s' that does not exist." % ghost) in detail(resp)
    assert generation(db, rp) == 0  # nothing was written


def test_amount_beyond_32_bits_is_400(client: Client, db: Database) -> None:
    rp = make_provider(db, "cn", VCPU=4)
    resp = put(client, new(), {rp: {"VCPU": 2**31}})
    assert resp.status_code == 400


def test_malformed_and_dashless_consumer(client: Client, db: Database) -> None:
    rp = make_provider(db, "cn", VCPU=4)
    resp = put(client, "not-a-uuid", {rp: {"VCPU": 1}})
    assert resp.status_code == 400
    assert "Malformed consumer_uuid: not-a-uuid" in detail(resp)
    consumer = new()
    assert put(client, consumer.replace("-", ""), {rp: {"VCPU": 1}}).status_code == 204
    got = client.get("/allocations/" + consumer).json()
    assert got["allocations"][rp]["resources"] == {"VCPU": 1}


def test_consumer_generations(client: Client, db: Database) -> None:
    rp = make_provider(db, "cn", VCPU=8)
    consumer = new()
    resp = put(client, consumer, {rp: {"VCPU": 1}}, gen=3)
    assert resp.status_code == 409
    assert code(resp) == "placement.concurrent_update"
    assert "consumer generation conflict - expected null but got 3" in detail(resp)
    assert put(client, consumer, {rp: {"VCPU": 1}}).status_code == 204
    got = client.at(V).get("/allocations/" + consumer).json()
    assert got["consumer_generation"] == 1
    assert (got["project_id"], got["user_id"]) == (PROJECT, USER)
    resp = put(client, consumer, {rp: {"VCPU": 2}}, gen=None)
    assert "expected 1 but got None" in detail(resp)
    assert put(client, consumer, {rp: {"VCPU": 2}}, gen=1).status_code == 204
    # Before 1.28 no generation is given, but it still moves.
    old = client.at("1.27").put(
        "/allocations/" + consumer,
        json={
            "allocations": {rp: {"resources": {"VCPU": 3}}},
            "project_id": PROJECT,
            "user_id": USER,
        },
    )
    assert old.status_code == 204
    assert client.get("/allocations/" + consumer).json()["consumer_generation"] == 3


def test_emptying_deletes_consumer(client: Client, db: Database) -> None:
    rp = make_provider(db, "cn", VCPU=8)
    consumer = new()
    put(client, consumer, {rp: {"VCPU": 4}})
    assert generation(db, rp) == 1
    assert put(client, consumer, {}, gen=1).status_code == 204
    assert generation(db, rp) == 2  # the emptied provider is bumped
    assert client.get("/allocations/" + consumer).json() == {"allocations": {}}
    # The consumer is gone: it is new again.
    resp = put(client, consumer, {rp: {"VCPU": 1}}, gen=2)
    assert "expected null but got 2" in detail(resp)
    assert put(client, consumer, {rp: {"VCPU": 1}}).status_code == 204


def _empty(
    db: Database,
    consumer: str,
    gen: int,
    written: threading.Event | None = None,
    hold: threading.Event | None = None,
) -> None:
    def work(conn: Any) -> None:
        allocation.replace_allocations(
            conn, [ConsumerAllocations(consumer, {}, PROJECT, USER, gen, check_generation=True)]
        )
        if written is not None and hold is not None:
            written.set()  # written but not committed: the race window
            hold.wait(10)

    db.run(work)


def test_emptying_race_second_writer_loses(client: Client, db: Database) -> None:
    """Two writers empty one consumer with the same generation: while the
    first is still uncommitted the second starts; it must get 409."""
    rp = make_provider(db, "cn", VCPU=8)
    consumer = new()
    put(client, consumer, {rp: {"VCPU": 4}})
    written, release = threading.Event(), threading.Event()
    first = threading.Thread(target=_empty, args=(db, consumer, 1, written, release))
    first.start()
    assert written.wait(10)
    outcome: list[BaseException | None] = []

    def second() -> None:
        try:
            _empty(db, consumer, 1)
            outcome.append(None)
        except errors.ConcurrentUpdate as exc:
            outcome.append(exc)

    racer = threading.Thread(target=second)
    racer.start()
    racer.join(0.3)  # give it time to block on the first writer's locks
    release.set()
    first.join(15)
    racer.join(15)
    assert len(outcome) == 1
    assert isinstance(outcome[0], errors.ConcurrentUpdate)


def test_provider_generations(client: Client, db: Database) -> None:
    a = make_provider(db, "a", VCPU=8)
    b = make_provider(db, "b", VCPU=8)
    consumer = new()
    put(client, consumer, {a: {"VCPU": 1}, b: {"VCPU": 1}})
    assert (generation(db, a), generation(db, b)) == (1, 1)
    # Moving away from a provider does not bump it (as upstream).
    put(client, consumer, {b: {"VCPU": 2}}, gen=1)
    assert (generation(db, a), generation(db, b)) == (1, 2)
    # Neither does DELETE.
    assert client.delete("/allocations/" + consumer).status_code == 204
    assert generation(db, b) == 2
    resp = client.delete("/allocations/" + consumer)
    assert resp.status_code == 404
    assert "No allocations for consumer '%s'" % consumer in detail(resp)


def test_post_moves_allocations(client: Client, db: Database) -> None:
    rp = make_provider(db, "cn", VCPU=4)
    source, target = new(), new()
    put(client, source, {rp: {"VCPU": 4}})
    resp = client.at(V).post(
        "/allocations", json={source: body({}, 1), target: body({rp: {"VCPU": 4}})}
    )
    assert resp.status_code == 204, resp.text
    assert client.get("/allocations/" + source).json() == {"allocations": {}}
    got = client.get("/allocations/" + target).json()
    assert got["allocations"][rp]["resources"] == {"VCPU": 4}
    assert got["consumer_type"] == "unknown"
    assert generation(db, rp) == 2
    usages = client.get("/resource_providers/%s/usages" % rp).json()
    assert usages == {"resource_provider_generation": 2, "usages": {"VCPU": 4}}


def test_post_is_atomic(client: Client, db: Database) -> None:
    rp = make_provider(db, "cn", VCPU=4)
    ok, bad = new(), new()
    resp = client.at(V).post(
        "/allocations", json={ok: body({rp: {"VCPU": 1}}), bad: body({rp: {"VCPU": 1}}, 7)}
    )
    assert resp.status_code == 409
    assert client.get("/allocations/" + ok).json() == {"allocations": {}}
    assert generation(db, rp) == 0


def test_list_for_provider(client: Client, db: Database) -> None:
    rp = make_provider(db, "cn", VCPU=8, MEMORY_MB=1024)
    consumer = new()
    put(client, consumer, {rp: {"VCPU": 2, "MEMORY_MB": 256}})
    got = client.get("/resource_providers/%s/allocations" % rp).json()
    assert got == {
        "resource_provider_generation": 1,
        "allocations": {
            consumer: {"resources": {"VCPU": 2, "MEMORY_MB": 256}, "consumer_generation": 1}
        },
    }
    old = client.at("1.27").get("/resource_providers/%s/allocations" % rp)
    assert "consumer_generation" not in old.json()["allocations"][consumer]
    assert client.get("/resource_providers/%s/allocations" % new()).status_code == 404


def test_consumer_type_shown(client: Client, db: Database) -> None:
    rp = make_provider(db, "cn", VCPU=8)
    consumer = new()
    resp = client.put("/allocations/" + consumer, json=body({rp: {"VCPU": 1}}, ctype="MIGRATION"))
    assert resp.status_code == 204
    got = client.get("/allocations/" + consumer).json()
    assert got["consumer_type"] == "MIGRATION"
    assert "consumer_type" not in client.at(V).get("/allocations/" + consumer).json()


def test_run_claim_retries_then_gives_up(db: Database) -> None:
    calls: list[int] = []

    def flaky(conn: Any) -> str:
        calls.append(1)
        if len(calls) < 3:
            raise errors.ClaimedProviderDeleted("race")
        return "done"

    assert allocation.run_claim(db, flaky, 5) == "done"
    assert len(calls) == 3

    def always(conn: Any) -> None:
        raise errors.ClaimedProviderDeleted("race")

    with pytest.raises(errors.ClaimedProviderDeleted, match="resource provider data"):
        allocation.run_claim(db, always, 2)


def test_a_claimed_provider_deleted_before_its_lock(db: Database) -> None:
    """What ``ClaimedProviderDeleted`` means: a provider the write read
    is gone when it comes to lock it (a live one is locked and its
    generation bumped, with no compare); it answers 409
    ``placement.concurrent_update``."""
    rp = make_provider(db, "claimed-then-deleted")
    rps = t.resource_providers

    def row() -> Any:
        return db.read(
            lambda conn: conn.execute(
                sa.select(rps.c.id, rps.c.generation).where(rps.c.uuid == rp)
            ).one()
        )

    def lock(ids: set[int]) -> Any:
        return db.run(lambda conn: claim.lock_providers(conn, ids))

    rp_id = row().id
    lock({rp_id})
    assert row().generation == 1
    with pytest.raises(errors.ClaimedProviderDeleted, match="resource provider data"):
        lock({rp_id, rp_id + 10_000})
    assert row().generation == 1  # the transaction rolled back whole
    problem = api_errors.from_domain(errors.ClaimedProviderDeleted(claim.PROVIDER_DELETED_MESSAGE))
    assert (problem.status, problem.code) == (409, api_errors.CONCURRENT_UPDATE)


def test_claim_replaces_allocations_of_a_consumer_without_a_record(
    client: Client, db: Database
) -> None:
    """Allocations whose consumer row is missing (legacy data, before
    consumer records) are the consumer's: a first PUT for it, which
    creates the record, replaces them rather than adding to them."""
    rp = make_provider(db, "cn", VCPU={"total": 8})
    consumer = new()
    assert put(client, consumer, {rp: {"VCPU": 6}}).status_code == 204
    db.run(lambda conn: conn.execute(t.consumers.delete().where(t.consumers.c.uuid == consumer)))
    # 6 of 8 are held: adding 4 would not fit, replacing 6 by 4 does.
    assert put(client, consumer, {rp: {"VCPU": 4}}).status_code == 204
    used = db.read(
        lambda conn: conn.scalar(
            sa.select(sa.func.sum(t.allocations.c.used)).where(
                t.allocations.c.resource_provider_id
                == sa.select(t.resource_providers.c.id)
                .where(t.resource_providers.c.uuid == rp)
                .scalar_subquery()
            )
        )
    )
    assert used == 4
