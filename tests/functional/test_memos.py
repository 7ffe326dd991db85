"""Kept answers (``berth.domain.memo``) stay exactly what the database says.

Two applications share one database: one keeps usages and provider rows
between requests, the other (``candidate_cache = false``) reads
everything each time. After every kind of write that changes what
``/usages`` or a filtered provider listing shows, both must answer the
same bytes and the same caching headers.
"""

from __future__ import annotations

import uuid as uuidlib
from typing import Any

import pytest
import sqlalchemy as sa

from berth.api.app import create_app
from berth.db import changes, online
from berth.db import tables as t
from berth.db.engine import Database
from berth.domain import common
from berth.domain.memo import Memo
from tests.conftest import Client, make_conf
from tests.functional.ledger_helpers import PROJECT, USER, body

OTHER = "0b7a2f4e-3f7e-4a61-9a55-d1d6b0b7a0ff"
LISTINGS = ["/resource_providers?required=HW_CPU_X86_AVX2",
            "/resource_providers?resources=VCPU:1",
            "/resource_providers?member_of=in:%s" % uuidlib.UUID(int=7)]
USAGES = ["/usages?project_id=%s" % PROJECT,
          "/usages?project_id=%s&user_id=%s" % (PROJECT, USER),
          "/usages?project_id=%s&consumer_type=all" % PROJECT,
          "/usages?project_id=%s&consumer_type=INSTANCE" % PROJECT,
          "/usages?project_id=%s" % OTHER]
VERSIONS = ["1.9", "1.14", "1.15", "1.18", "1.37", "1.39"]


@pytest.fixture
def pair(db: Database) -> tuple[Client, Client]:
    kept = Client(create_app(make_conf(), db))
    fresh = Client(create_app(make_conf(berth__candidate_cache=False), db))
    return kept, fresh


def _same(kept: Client, fresh: Client) -> None:
    for url in LISTINGS + USAGES:
        for version in VERSIONS:
            for _ in range(2):  # the second answer comes from the memo
                a = kept.at(version).get(url)
                b = fresh.at(version).get(url)
                assert a.status_code == b.status_code, (version, url)
                if a.status_code != 200:  # errors carry request ids
                    continue
                assert a.content == b.content, (version, url)
                # /usages, and a listing of no provider, say "now".
                if (not url.startswith("/usages")
                        and a.json()["resource_providers"]):
                    assert (a.headers.get("last-modified")
                            == b.headers.get("last-modified")), (version, url)


def _provider(client: Client, name: str, traits: list[str]) -> dict[str, Any]:
    rp = client.post("/resource_providers", json={"name": name}).json()
    inv = client.put("/resource_providers/%s/inventories" % rp["uuid"], json={
        "resource_provider_generation": 0,
        "inventories": {"VCPU": {"total": 8}, "DISK_GB": {"total": 100}}})
    assert inv.status_code == 200, inv.text
    got = client.put("/resource_providers/%s/traits" % rp["uuid"], json={
        "resource_provider_generation": 1, "traits": traits})
    assert got.status_code == 200, got.text
    return client.get("/resource_providers/%s" % rp["uuid"]).json()  # type: ignore[no-any-return]


def test_kept_answers_follow_every_write(pair: tuple[Client, Client]) -> None:
    kept, fresh = pair
    one = _provider(kept, "one", ["HW_CPU_X86_AVX2"])
    two = _provider(fresh, "two", ["HW_CPU_X86_AVX2"])
    _same(kept, fresh)
    consumer = str(uuidlib.uuid4())
    claim = body({one["uuid"]: {"VCPU": 2}}, ctype="INSTANCE")
    assert kept.put("/allocations/" + consumer, json=claim).status_code == 204
    _same(kept, fresh)  # the usage, and one's generation and time
    # The same allocations, another project, user and type.
    moved = body({one["uuid"]: {"VCPU": 2}}, 1, project=OTHER, user=OTHER,
                 ctype="MIGRATION")
    assert fresh.put("/allocations/" + consumer, json=moved).status_code == 204
    _same(kept, fresh)
    assert fresh.put("/resource_providers/%s" % two["uuid"],
                     json={"name": "renamed"}).status_code == 200
    _same(kept, fresh)
    assert fresh.put("/resource_providers/%s/traits" % two["uuid"], json={
        "resource_provider_generation": two["generation"],
        "traits": []}).status_code == 200
    _same(kept, fresh)
    now = fresh.get("/resource_providers/%s" % one["uuid"]).json()
    agg = {"aggregates": [str(uuidlib.UUID(int=7))],
           "resource_provider_generation": now["generation"]}
    assert fresh.put("/resource_providers/%s/aggregates" % one["uuid"],
                     json=agg).status_code == 200
    _same(kept, fresh)
    assert fresh.delete("/allocations/" + consumer).status_code == 204
    _same(kept, fresh)
    assert fresh.delete("/resource_providers/%s" % two["uuid"]
                        ).status_code == 204
    _provider(fresh, "three", ["HW_CPU_X86_AVX2"])
    _same(kept, fresh)


def test_a_change_forgets_only_what_it_names(db: Database) -> None:
    whole, per_provider = Memo(), Memo(by_provider=True)

    def fill(conn: Any) -> None:
        for memo in (whole, per_provider):
            memo.values(conn).update({1: "one", 2: "two"})
    db.read(fill)
    db.run(lambda conn: changes.note(conn, changes.USAGE, [1]))
    assert db.read(whole.values) == {}
    assert db.read(per_provider.values) == {2: "two"}
    db.run(lambda conn: changes.note(conn, changes.STRUCTURE))
    assert db.read(per_provider.values) == {}


def test_an_older_transaction_keeps_nothing(
        db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    memo = Memo()
    db.run(lambda conn: changes.note(conn, changes.USAGE, [1]))
    old = db.read(changes.current)
    db.run(lambda conn: changes.note(conn, changes.USAGE, [1]))
    db.read(memo.values)["newer"] = 1
    # A transaction that began before the last change fills its own dict.
    monkeypatch.setattr(changes, "current", lambda conn: old)
    db.read(memo.values)["stale"] = 2
    monkeypatch.undo()
    assert db.read(memo.values) == {"newer": 1}


def test_memos_keep_nothing_when_the_cache_is_off(db: Database) -> None:
    memo = Memo(keep=False)
    db.read(memo.values)["x"] = 1
    assert db.read(memo.values) == {}


def test_incomplete_consumers_count_once_migrated(
        db: Database, pair: tuple[Client, Client]) -> None:
    kept, _ = pair
    rp = _provider(kept, "old", [])
    nil = "00000000-0000-0000-0000-000000000000"
    url = "/usages?project_id=%s" % nil
    assert kept.at("1.9").get(url).json() == {"usages": {}}

    def orphan(conn: sa.Connection) -> None:  # allocations, no consumer row
        rp_id = conn.scalar(sa.select(t.resource_providers.c.id).where(
            t.resource_providers.c.uuid == rp["uuid"]))
        vcpu = common.resource_class_ids(conn, ["VCPU"])["VCPU"]
        conn.execute(t.allocations.insert().values(
            resource_provider_id=rp_id, resource_class_id=vcpu,
            consumer_id=str(uuidlib.uuid4()), used=3))
    db.run(orphan)
    conf = make_conf()
    assert db.run(lambda conn: online.create_incomplete_consumers(
        conn, conf, 50)) == (1, 1)
    assert kept.at("1.9").get(url).json() == {"usages": {"VCPU": 3}}
