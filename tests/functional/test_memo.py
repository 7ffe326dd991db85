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

from berth.db import changes
from berth.db import tables as t
from berth.db.engine import Database
from berth.domain import common, online
from berth.domain.memo import Memo
from support.allocation_setup import PROJECT, USER, body
from tests.conftest import Client, make_conf

OTHER = "0b7a2f4e-3f7e-4a61-9a55-d1d6b0b7a0ff"
LISTINGS = [
    "/resource_providers?required=HW_CPU_X86_AVX2",
    "/resource_providers?resources=VCPU:1",
    "/resource_providers?member_of=in:%s" % uuidlib.UUID(int=7),
]
USAGES = [
    "/usages?project_id=%s" % PROJECT,
    "/usages?project_id=%s&user_id=%s" % (PROJECT, USER),
    "/usages?project_id=%s&consumer_type=all" % PROJECT,
    "/usages?project_id=%s&consumer_type=INSTANCE" % PROJECT,
    "/usages?project_id=%s" % OTHER,
]
VERSIONS = ["1.9", "1.14", "1.15", "1.18", "1.37", "1.39"]


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
                if not url.startswith("/usages") and a.json()["resource_providers"]:
                    assert a.headers.get("last-modified") == b.headers.get("last-modified"), (
                        version,
                        url,
                    )


def _provider(client: Client, name: str, traits: list[str]) -> dict[str, Any]:
    rp = client.post("/resource_providers", json={"name": name}).json()
    inv = client.put(
        "/resource_providers/%s/inventories" % rp["uuid"],
        json={
            "resource_provider_generation": 0,
            "inventories": {"VCPU": {"total": 8}, "DISK_GB": {"total": 100}},
        },
    )
    assert inv.status_code == 200, inv.text
    got = client.put(
        "/resource_providers/%s/traits" % rp["uuid"],
        json={"resource_provider_generation": 1, "traits": traits},
    )
    assert got.status_code == 200, got.text
    return client.get("/resource_providers/%s" % rp["uuid"]).json()  # type: ignore[no-any-return]


def test_kept_answers_follow_every_write(memo_pair: tuple[Client, Client]) -> None:
    kept, fresh = memo_pair
    one = _provider(kept, "one", ["HW_CPU_X86_AVX2"])
    two = _provider(fresh, "two", ["HW_CPU_X86_AVX2"])
    _same(kept, fresh)
    consumer = str(uuidlib.uuid4())
    claim = body({one["uuid"]: {"VCPU": 2}}, ctype="INSTANCE")
    assert kept.put("/allocations/" + consumer, json=claim).status_code == 204
    _same(kept, fresh)  # the usage, and one's generation and time
    # The same allocations, another project, user and type.
    moved = body({one["uuid"]: {"VCPU": 2}}, 1, project=OTHER, user=OTHER, ctype="MIGRATION")
    assert fresh.put("/allocations/" + consumer, json=moved).status_code == 204
    _same(kept, fresh)
    assert (
        fresh.put("/resource_providers/%s" % two["uuid"], json={"name": "renamed"}).status_code
        == 200
    )
    _same(kept, fresh)
    assert (
        fresh.put(
            "/resource_providers/%s/traits" % two["uuid"],
            json={"resource_provider_generation": two["generation"], "traits": []},
        ).status_code
        == 200
    )
    _same(kept, fresh)
    now = fresh.get("/resource_providers/%s" % one["uuid"]).json()
    agg = {
        "aggregates": [str(uuidlib.UUID(int=7))],
        "resource_provider_generation": now["generation"],
    }
    assert fresh.put("/resource_providers/%s/aggregates" % one["uuid"], json=agg).status_code == 200
    _same(kept, fresh)
    assert fresh.delete("/allocations/" + consumer).status_code == 204
    _same(kept, fresh)
    assert fresh.delete("/resource_providers/%s" % two["uuid"]).status_code == 204
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


def test_an_older_transaction_keeps_nothing(db: Database, monkeypatch: pytest.MonkeyPatch) -> None:
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
    db: Database, memo_pair: tuple[Client, Client]
) -> None:
    kept, _ = memo_pair
    rp = _provider(kept, "old", [])
    nil = "00000000-0000-0000-0000-000000000000"
    url = "/usages?project_id=%s" % nil
    assert kept.at("1.9").get(url).json() == {"usages": {}}

    def orphan(conn: sa.Connection) -> None:  # allocations, no consumer row
        rp_id = conn.scalar(
            sa.select(t.resource_providers.c.id).where(t.resource_providers.c.uuid == rp["uuid"])
        )
        vcpu = common.resource_class_ids(conn, ["VCPU"])["VCPU"]
        conn.execute(
            t.allocations.insert().values(
                resource_provider_id=rp_id,
                resource_class_id=vcpu,
                consumer_id=str(uuidlib.uuid4()),
                used=3,
            )
        )

    db.run(orphan)
    conf = make_conf()
    assert db.run(lambda conn: online.create_incomplete_consumers(conn, conf, 50)) == (1, 1)
    assert kept.at("1.9").get(url).json() == {"usages": {"VCPU": 3}}


def _project_ids(db: Database, *names: str) -> list[int]:
    from berth.domain import consumer

    return db.run(lambda conn: [consumer.project_id(conn, n) for n in names])


def test_usages_are_updated_per_project(db: Database) -> None:
    seen: list[tuple[Any, Any, dict[Any, int]]] = []

    def update(conn: Any, key: Any, value: Any, deltas: Any) -> Any:
        seen.append((key, value, dict(deltas)))
        return None if value == "forget" else value + sum(deltas.values())

    memo = Memo(by_project=update)
    a, b = _project_ids(db, "project-a", "project-b")

    def fill(conn: Any) -> None:
        memo.values(conn).update({("project-a", 1): 10, ("project-a", 2): 20, ("project-b", 1): 30})

    db.read(fill)

    def claim(conn: Any) -> None:  # what an allocation write notes
        changes.note(conn, changes.USAGE, [5])
        changes.note_usage(conn, {(a, 9, None, 1): 2, (a, 9, None, None): 1})

    db.run(claim)
    assert db.read(memo.values) == {
        ("project-a", 1): 13,
        ("project-a", 2): 23,
        ("project-b", 1): 30,
    }
    assert {key for key, _, _ in seen} == {("project-a", 1), ("project-a", 2)}
    assert all(d == {(a, 9, None, 1): 2, (a, 9, None, None): 1} for _, _, d in seen)
    # Inventories, traits and aggregates leave usages as they were.
    seen.clear()
    db.run(lambda conn: changes.note(conn, changes.STRUCTURE, [5]))
    assert db.read(memo.values)[("project-b", 1)] == 30 and seen == []
    # Two writes in between: their amounts add up; a project that
    # changed by nothing in sum is still brought up to date.
    db.run(lambda conn: changes.note_usage(conn, {(b, 9, None, 1): 5}))
    db.run(lambda conn: changes.note_usage(conn, {(b, 9, None, 1): -5}))
    assert db.read(memo.values)[("project-b", 1)] == 30
    assert [key for key, _, _ in seen] == [("project-b", 1)]
    # A usage change that names no project (a writer from before the
    # project rows) may have changed any project's usages.
    db.run(lambda conn: changes.note(conn, changes.USAGE, [5]))
    assert db.read(memo.values) == {}
    db.read(
        lambda conn: memo.values(conn).update({("project-b", 1): "forget", ("project-a", 1): 1})
    )
    db.run(lambda conn: changes.note_usage(conn, {(b, 9, None, 1): 1}))
    assert db.read(memo.values) == {("project-a", 1): 1}
    db.run(lambda conn: changes.note(conn, changes.STRUCTURE))
    assert db.read(memo.values) == {}


def test_a_write_committed_while_a_value_is_computed_counts_once(db: Database) -> None:
    """A write that commits after a read took the memo's position but
    before it computed its value: at READ COMMITTED (PostgreSQL, MariaDB)
    the value holds the write, on SQLite (one snapshot) it does not;
    either way later answers add its amounts exactly once."""
    (a,) = _project_ids(db, "project-a")
    key = ("project-a", "VCPU")
    c = t.berth_changes.c

    def total(conn: Any) -> int:  # project-a's class 1, as its rows add up
        return int(
            conn.scalar(
                sa.select(sa.func.coalesce(sa.func.sum(c.amount), 0)).where(
                    c.kind == changes.PROJECT, c.resource_provider_id == a, c.resource_class_id == 1
                )
            )
        )

    def add(amount: int) -> None:  # one write, committed on its own connection
        db.run(lambda conn: changes.note_usage(conn, {(a, 9, None, 1): amount}))

    def update(conn: Any, key: Any, value: int, deltas: Any) -> int:
        return value + sum(n for k, n in deltas.items() if k[3] == 1)

    memo = Memo(by_project=update)
    base = db.read(total)  # the change rows outlive a test's reset
    add(2)

    def compute_meanwhile(conn: Any) -> int:
        add(3)
        return total(conn)

    first = db.read(lambda conn: memo.kept(conn, key, compute_meanwhile))
    assert first - base == (2 if db.backend == "sqlite" else 5)
    add(4)
    assert db.read(total) - base == 9
    for _ in range(2):  # brought up to date, then as kept
        assert db.read(lambda conn: memo.kept(conn, key, total)) - base == 9


def test_since_sums_project_rows_and_spots_writes_without_them(db: Database) -> None:
    a, b = _project_ids(db, "project-a", "project-b")
    start = db.read(changes.current)

    def claim(project: int, amount: int) -> Any:
        def work(conn: Any) -> None:
            changes.note(conn, changes.USAGE, [7])
            changes.note_usage(conn, {(project, 3, None, 1): amount, (project, 3, None, None): 1})

        return work

    db.run(claim(a, 2))
    db.run(claim(b, 4))
    db.run(claim(a, 1))
    middle = db.read(changes.current)
    found = db.read(lambda c: changes.since(c, start, middle))
    assert found.projects == {a, b} and found.usage == {7}
    assert found.deltas == {
        (a, 3, None, 1): 3,
        (a, 3, None, None): 2,
        (b, 3, None, 1): 4,
        (b, 3, None, None): 1,
    }
    db.run(lambda conn: changes.note(conn, changes.USAGE, [7]))
    now = db.read(changes.current)
    assert db.read(lambda c: changes.since(c, start, now)).projects is None
    assert db.read(lambda c: changes.since(c, middle, now)).projects is None


def test_too_many_project_rows_count_as_unknown_amounts(db: Database) -> None:
    start = db.read(changes.current)

    def big(conn: Any) -> None:
        changes.note(conn, changes.USAGE, [7])
        changes.note_usage(conn, {(1, user, None, 1): 1 for user in range(changes.MAX_ROWS + 1)})

    db.run(big)
    found = db.read(lambda c: changes.since(c, start, db.read(changes.current)))
    assert not found.everything and found.usage == {7}
    assert found.projects is None


def test_a_write_in_one_project_keeps_another_projects_usages(
    db: Database, memo_pair: tuple[Client, Client]
) -> None:
    kept, fresh = memo_pair
    one = _provider(kept, "one", [])
    first = str(uuidlib.uuid4())
    assert (
        kept.put(
            "/allocations/" + first, json=body({one["uuid"]: {"VCPU": 1}}, ctype="INSTANCE")
        ).status_code
        == 204
    )
    url = "/usages?project_id=%s" % PROJECT
    k19, f19 = kept.at("1.9"), fresh.at("1.9")
    memo = kept._transport.app.state.usage_memo  # type: ignore[attr-defined]
    assert k19.get(url).json() == f19.get(url).json()
    assert list(db.read(memo.values).values()) == [{"VCPU": 1}]
    # A claim in another project: the kept answer stays, and is right.
    other = str(uuidlib.uuid4())
    assert (
        fresh.put(
            "/allocations/" + other,
            json=body({one["uuid"]: {"VCPU": 2}}, project=OTHER, ctype="INSTANCE"),
        ).status_code
        == 204
    )
    assert list(db.read(memo.values).values()) == [{"VCPU": 1}]
    # The other consumer moves into the project: the kept answer is
    # brought up to date from the write's amounts, not computed again.
    assert (
        fresh.put(
            "/allocations/" + other, json=body({one["uuid"]: {"VCPU": 2}}, 1, ctype="INSTANCE")
        ).status_code
        == 204
    )
    assert list(db.read(memo.values).values()) == [{"VCPU": 3}]
    assert k19.get(url).json() == f19.get(url).json() == {"usages": {"VCPU": 3}}
    assert k19.get("/usages?project_id=%s" % OTHER).json() == {"usages": {}}
    assert fresh.delete("/allocations/" + first).status_code == 204
    assert sorted(map(str, db.read(memo.values).values())) == ["{'VCPU': 2}", "{}"]
    assert k19.get(url).json() == {"usages": {"VCPU": 2}}


WALK_PROJECTS = [PROJECT, OTHER, "5d1e0c3a-9b7f-4e2d-8c6a-1f0e9d8c7b6a"]
WALK_USERS = [USER, OTHER]
WALK_TYPES = ["INSTANCE", "MIGRATION", None]


def _walk_urls() -> list[tuple[str, str]]:
    urls = []
    for project in WALK_PROJECTS:
        base = "/usages?project_id=%s" % project
        for version in ("1.9", "1.38"):
            urls.append((version, base))
            urls.append((version, base + "&user_id=%s" % USER))
        for ctype in ("all", "unknown", "INSTANCE", "MIGRATION", "NONE_SUCH"):
            urls.append(("1.38", base + "&consumer_type=%s" % ctype))
    return urls


def test_kept_usages_follow_a_random_walk_of_writes(
    db: Database, memo_pair: tuple[Client, Client]
) -> None:
    """After every write (claims, resizes, moves between projects, users
    and types, removals, several consumers at once, a consumer emptied
    through POST), each kept answer, brought up to date from the write's
    amounts, is byte for byte what an app without memos computes."""
    import random

    rng = random.Random(20261201)
    kept, fresh = memo_pair
    rps = [_provider(kept, name, [])["uuid"] for name in ("w1", "w2")]
    consumers = [str(uuidlib.UUID(int=1000 + n)) for n in range(6)]
    urls = _walk_urls()
    memo = kept._transport.app.state.usage_memo  # type: ignore[attr-defined]

    def answers(client: Client) -> list[bytes]:
        out = []
        for version, url in urls:
            got = client.at(version).get(url)
            assert got.status_code == 200, (version, url, got.text)
            out.append(got.content)
        return out

    def generation(consumer: str) -> Any:
        got = fresh.at("1.38").get("/allocations/" + consumer).json()
        return got.get("consumer_generation")

    def allocation() -> dict[str, Any]:
        allocs: dict[str, dict[str, int]] = {}
        for rp in rng.sample(rps, rng.randint(0, 2)):
            res = {
                rc: rng.randint(1, 3) for rc in rng.sample(["VCPU", "DISK_GB"], rng.randint(1, 2))
            }
            allocs[rp] = res
        ctype = rng.choice(WALK_TYPES)
        data = body(
            allocs,
            None,
            project=rng.choice(WALK_PROJECTS),
            user=rng.choice(WALK_USERS),
            ctype=ctype,
        )
        return data

    updated = written = 0
    for step in range(40):
        answers(kept)  # every answer kept before the write
        before = dict(db.read(memo.values))
        writer = rng.choice([kept, fresh])
        action = rng.random()
        if action < 0.6:
            consumer = rng.choice(consumers)
            data = allocation()
            data["consumer_generation"] = generation(consumer)
            # Without a type, 1.37 (the consumer keeps the one it has).
            version = "1.38" if data.get("consumer_type") else "1.37"
            got = writer.at(version).put("/allocations/" + consumer, json=data)
            # 409: past a provider's capacity (a rejected write changes
            # nothing, kept answers included).
            assert got.status_code in (204, 409), (step, got.text)
        elif action < 0.8:
            pair_of = rng.sample(consumers, 2)
            payload = {}
            for consumer in pair_of:
                data = allocation()
                data["consumer_generation"] = generation(consumer)
                data.setdefault("consumer_type", "INSTANCE")
                payload[consumer] = data
            got = writer.at("1.38").post("/allocations", json=payload)
            assert got.status_code in (204, 409), (step, got.text)
        else:
            consumer = rng.choice(consumers)
            got = writer.delete("/allocations/" + consumer)
            assert got.status_code in (204, 404), (step, got.text)
        written += got.status_code == 204
        after = db.read(memo.values)
        updated += sum(1 for k in after if k in before and after[k] != before[k])
        assert answers(kept) == answers(fresh), step
    # The walk did exercise the updates, not only recomputation.
    assert written > 25 and updated > 20, (written, updated)
