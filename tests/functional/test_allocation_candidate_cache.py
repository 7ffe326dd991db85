"""The per-worker candidate cache never answers from a stale world.

Three apps share one database, as three workers would: a writer, a reader
(each with its own cache) and a reference with the cache off (it reads the
database whole on every request). After every write of a long random walk
over every kind of write that can change an answer, the three must give
byte-identical answers to a set of candidate and provider queries.
"""

from __future__ import annotations

import random
import uuid as uuidlib
from typing import Any

import pytest
import sqlalchemy as sa

from berth.api.app import create_app
from berth.db import changes
from berth.db import tables as t
from berth.db.engine import Database
from berth.domain import claim
from berth.domain.allocation_candidate import load, world_patch
from berth.domain.allocation_candidate.cache import Refresh
from berth.domain.allocation_candidate.world import World
from support.candidate_worlds import assert_same
from tests.conftest import Client, make_conf

AGGS = ["5e9a2b1c-0000-4000-8000-0000000000a1", "5e9a2b1c-0000-4000-8000-0000000000a2"]
TRAITS = ["CUSTOM_A", "CUSTOM_B", "MISC_SHARES_VIA_AGGREGATE", "HW_CPU_X86_AVX2"]
QUERIES = [
    "/allocation_candidates?resources=VCPU:1",
    "/allocation_candidates?resources=VCPU:1,DISK_GB:10",
    "/allocation_candidates?resources=VCPU:1&required=CUSTOM_A",
    "/allocation_candidates?resources=MEMORY_MB:64&member_of=in:%s,%s" % tuple(AGGS),
    "/allocation_candidates?resources1=VCPU:1&resources2=MEMORY_MB:64&group_policy=none",
    "/allocation_candidates?resources=CUSTOM_GPU:1",
    "/resource_providers?resources=VCPU:2",
    "/resource_providers?required=CUSTOM_B",
    "/resource_providers?member_of=%s" % AGGS[0],
]


def _uuid(n: int) -> str:
    return "00000000-0000-4000-8000-%012d" % n


def _hosts(client: Client, count: int, vcpu: int) -> None:
    """Providers h1..h<count>, each with ``vcpu`` VCPU."""
    for n in range(1, count + 1):
        assert (
            client.post(
                "/resource_providers", json={"name": "h%d" % n, "uuid": _uuid(n)}
            ).status_code
            == 200
        )
        assert (
            client.put(
                "/resource_providers/%s/inventories" % _uuid(n),
                json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": vcpu}}},
            ).status_code
            == 200
        )


class Walk:
    """Random writes through the writer app; remembers what exists."""

    def __init__(self, client: Client, seed: int) -> None:
        self.c = client
        self.rnd = random.Random(seed)
        self.providers: dict[str, str | None] = {}  # uuid -> parent
        self.consumers: list[str] = []
        self.next = 1

    def gen(self, rp: str) -> int:
        return int(self.c.get("/resource_providers/%s" % rp).json()["generation"])

    def pick(self) -> str:
        return self.rnd.choice(sorted(self.providers))

    def create(self) -> None:
        rp = _uuid(self.next)
        body: dict[str, Any] = {"name": "rp%d" % self.next, "uuid": rp}
        roots = [p for p, parent in self.providers.items() if parent is None]
        if roots and self.rnd.random() < 0.4:
            body["parent_provider_uuid"] = self.rnd.choice(sorted(roots))
        self.next += 1
        assert self.c.post("/resource_providers", json=body).status_code == 200
        self.providers[rp] = body.get("parent_provider_uuid")

    def inventory(self) -> None:
        rp = self.pick()
        inv = {
            rc: {"total": self.rnd.choice([1, 2, 4, 64, 1024])}
            for rc in self.rnd.sample(
                ["VCPU", "MEMORY_MB", "DISK_GB", "CUSTOM_GPU"], self.rnd.randint(0, 3)
            )
        }
        self.c.put("/resource_classes/CUSTOM_GPU")
        self.c.put(
            "/resource_providers/%s/inventories" % rp,
            json={"resource_provider_generation": self.gen(rp), "inventories": inv},
        )  # 409 when in use: fine, nothing changes

    def traits(self) -> None:
        rp = self.pick()
        names = self.rnd.sample(TRAITS, self.rnd.randint(0, 3))
        for name in names:
            if name.startswith("CUSTOM_"):
                self.c.put("/traits/%s" % name)
        resp = self.c.put(
            "/resource_providers/%s/traits" % rp,
            json={"resource_provider_generation": self.gen(rp), "traits": names},
        )
        assert resp.status_code == 200, resp.text

    def aggregates(self) -> None:
        rp = self.pick()
        resp = self.c.put(
            "/resource_providers/%s/aggregates" % rp,
            json={
                "resource_provider_generation": self.gen(rp),
                "aggregates": self.rnd.sample(AGGS, self.rnd.randint(0, 2)),
            },
        )
        assert resp.status_code == 200, resp.text

    def claim(self) -> None:
        rp = self.pick()
        consumer = (
            self.rnd.choice(self.consumers)
            if self.consumers and self.rnd.random() < 0.3
            else str(uuidlib.uuid4())
        )
        current = self.c.get("/allocations/%s" % consumer).json()
        resp = self.c.put(
            "/allocations/%s" % consumer,
            json={
                "allocations": {rp: {"resources": {self.rnd.choice(["VCPU", "MEMORY_MB"]): 1}}},
                "project_id": "p",
                "user_id": "u",
                "consumer_generation": current.get("consumer_generation"),
                "consumer_type": "INSTANCE",
            },
        )
        if resp.status_code == 204 and consumer not in self.consumers:
            self.consumers.append(consumer)

    def unclaim(self) -> None:
        if not self.consumers:
            return
        consumer = self.consumers.pop(self.rnd.randrange(len(self.consumers)))
        if self.rnd.random() < 0.5:
            assert self.c.delete("/allocations/%s" % consumer).status_code == 204
            return
        current = self.c.get("/allocations/%s" % consumer).json()
        resp = self.c.post(
            "/allocations",
            json={
                consumer: {
                    "allocations": {},
                    "project_id": "p",
                    "user_id": "u",
                    "consumer_generation": current["consumer_generation"],
                    "consumer_type": "INSTANCE",
                }
            },
        )
        assert resp.status_code == 204, resp.text

    def delete(self) -> None:
        leaves = [p for p in self.providers if p not in self.providers.values()]
        rp = self.rnd.choice(sorted(leaves))
        if self.c.delete("/resource_providers/%s" % rp).status_code == 204:
            del self.providers[rp]

    def reparent(self) -> None:
        rp = self.pick()
        roots = [p for p, parent in self.providers.items() if parent is None and p != rp]
        if not roots or rp in self.providers.values():
            return
        resp = self.c.put(
            "/resource_providers/%s" % rp,
            json={
                "name": "moved-%s" % rp[-4:],
                "parent_provider_uuid": self.rnd.choice(sorted(roots)),
            },
        )
        if resp.status_code == 200:
            self.providers[rp] = resp.json()["parent_provider_uuid"]

    def step(self) -> str:
        if len(self.providers) < 3:
            self.create()
            return "create"
        action = self.rnd.choice(
            [
                "create",
                "inventory",
                "inventory",
                "traits",
                "aggregates",
                "claim",
                "claim",
                "claim",
                "unclaim",
                "unclaim",
                "delete",
                "reparent",
            ]
        )
        getattr(self, action)()
        return action


def _answers(client: Client) -> list[Any]:
    out = []
    for query in QUERIES:
        resp = client.get(query)
        assert resp.status_code == 200, (query, resp.text)
        out.append(resp.json())
    return out


def _names(client: Client) -> None:
    for name in ("CUSTOM_A", "CUSTOM_B"):
        assert client.put("/traits/%s" % name).status_code == 201
    assert client.put("/resource_classes/CUSTOM_GPU").status_code == 201


@pytest.mark.parametrize("exclusive", [False, True], ids=["copied", "in-place"])
@pytest.mark.parametrize("seed", [1, 2])
def test_three_workers_agree_after_every_write(db: Database, seed: int, exclusive: bool) -> None:
    """Two cached apps and one without the cache give the same answers
    after every kind of write; also when the cached ones update their
    worlds in place (``CandidateCache.exclusive``, as ``berth serve``'s
    workers do)."""
    conf = make_conf()
    reader_db, reference_db = Database(db.engine), Database(db.engine)
    off = make_conf(berth__candidate_cache=False)
    writer_app, reader_app = create_app(conf, db), create_app(conf, reader_db)
    writer_app.state.candidate_cache.exclusive = reader_app.state.candidate_cache.exclusive = (
        exclusive
    )
    with (
        Client(writer_app) as writer,
        Client(reader_app) as reader,
        Client(create_app(off, reference_db)) as reference,
    ):
        _names(writer)
        walk = Walk(writer, seed)
        done = []
        for _ in range(60):
            done.append(walk.step())
            expected = _answers(reference)
            assert _answers(reader) == expected, done
            assert _answers(writer) == expected, done
    # The walk did reach every kind of write.
    assert {"inventory", "traits", "aggregates", "claim", "unclaim", "delete", "reparent"} <= set(
        done
    )


@pytest.mark.parametrize("exclusive", [False, True], ids=["copied", "in-place"])
def test_refreshed_worlds_equal_loaded_ones(
    db: Database, monkeypatch: Any, exclusive: bool
) -> None:
    """A worker refreshing its world after each write of the walk (its
    indexes patched for a structural change, in copies or, in a worker
    answering one request at a time, in place) holds, index by index,
    the world a whole load reads."""
    patches: list[World | None] = []
    modes: set[bool] = set()
    real = world_patch.with_changes

    def recorded(
        world: World, fresh: Any, gone: Any = (), *, in_place: bool = False
    ) -> World | None:
        modes.add(in_place)
        patches.append(real(world, fresh, gone, in_place=in_place))
        return patches[-1]

    monkeypatch.setattr(world_patch, "with_changes", recorded)
    conf = make_conf()
    seen: list[Refresh] = []
    reader_app = create_app(conf, Database(db.engine), world_observers=[seen.append])
    reader_app.state.candidate_cache.exclusive = exclusive
    with Client(create_app(conf, db)) as writer, Client(reader_app) as reader:
        _names(writer)
        # Enough providers that a write re-reads a few, not the world.
        _hosts(writer, 12, 4)
        walk = Walk(writer, 3)
        walk.next = 100
        for _ in range(40):
            walk.step()
            assert reader.get(QUERIES[1]).status_code == 200
            with db.engine.connect() as conn:
                built = load.load_world(conn)[0]
            assert_same(seen[-1].cached.world, built, memos=False)
    assert any(p is not None for p in patches)
    assert exclusive in modes


def test_each_change_reads_only_what_it_must(db: Database, monkeypatch: Any) -> None:
    """A claim or a delete re-reads the usage of the providers it touched;
    an inventory change re-reads that provider; deleting a trait (which
    no cached world can tie to providers) reloads the world."""
    calls: list[str] = []
    for name in ("load_world", "refresh_providers", "refresh_usage"):
        real = getattr(load, name)
        monkeypatch.setattr(
            load, name, lambda *a, _n=name, _f=real, **k: calls.append(_n) or _f(*a, **k)
        )
    with Client(create_app(make_conf(), db)) as client:
        _hosts(client, 8, 2)
        query = "/allocation_candidates?resources=VCPU:2"
        assert len(client.get(query).json()["allocation_requests"]) == 8
        assert calls == ["load_world"]
        consumer = str(uuidlib.uuid4())
        assert (
            client.put(
                "/allocations/%s" % consumer,
                json={
                    "allocations": {_uuid(1): {"resources": {"VCPU": 1}}},
                    "project_id": "p",
                    "user_id": "u",
                    "consumer_generation": None,
                    "consumer_type": "INSTANCE",
                },
            ).status_code
            == 204
        )
        assert len(client.get(query).json()["allocation_requests"]) == 7
        assert client.delete("/allocations/%s" % consumer).status_code == 204
        assert len(client.get(query).json()["allocation_requests"]) == 8
        assert calls == ["load_world", "refresh_usage", "refresh_usage"]
        gen = client.get("/resource_providers/%s" % _uuid(1)).json()["generation"]
        assert (
            client.put(
                "/resource_providers/%s/inventories" % _uuid(1),
                json={"resource_provider_generation": gen, "inventories": {"VCPU": {"total": 1}}},
            ).status_code
            == 200
        )
        assert len(client.get(query).json()["allocation_requests"]) == 7
        assert calls[-1] == "refresh_providers"
        assert client.put("/traits/CUSTOM_X").status_code == 201
        assert client.delete("/traits/CUSTOM_X").status_code == 204
        assert len(client.get(query).json()["allocation_requests"]) == 7
        assert calls[-1] == "load_world"
        assert calls.count("load_world") == 2


@pytest.mark.parametrize("how", ["put", "post"])
def test_moved_consumer_frees_the_provider_it_left(db: Database, how: str) -> None:
    """A move changes the usage of the provider left behind, which the
    claim does not lock: another worker must still see it freed."""
    with (
        Client(create_app(make_conf(), db)) as writer,
        Client(create_app(make_conf(), Database(db.engine))) as reader,
    ):
        _hosts(writer, 2, 1)
        consumer = str(uuidlib.uuid4())
        body = {"project_id": "p", "user_id": "u", "consumer_type": "INSTANCE"}
        assert (
            writer.put(
                "/allocations/%s" % consumer,
                json={
                    **body,
                    "consumer_generation": None,
                    "allocations": {_uuid(1): {"resources": {"VCPU": 1}}},
                },
            ).status_code
            == 204
        )
        query = "/allocation_candidates?resources=VCPU:1"
        assert reader.get(query).json()["allocation_requests"] == [
            {"allocations": {_uuid(2): {"resources": {"VCPU": 1}}}, "mappings": {"": [_uuid(2)]}}
        ]
        move = {
            **body,
            "consumer_generation": 1,
            "allocations": {_uuid(2): {"resources": {"VCPU": 1}}},
        }
        resp = (
            writer.put("/allocations/%s" % consumer, json=move)
            if how == "put"
            else writer.post("/allocations", json={consumer: move})
        )
        assert resp.status_code == 204, resp.text
        assert reader.get(query).json()["allocation_requests"] == [
            {"allocations": {_uuid(1): {"resources": {"VCPU": 1}}}, "mappings": {"": [_uuid(1)]}}
        ]


def test_deleted_trait_is_unknown_again(db: Database) -> None:
    with Client(create_app(make_conf(), db)) as client:
        assert client.put("/traits/CUSTOM_GONE").status_code == 201
        query = "/allocation_candidates?resources=VCPU:1&required=CUSTOM_GONE"
        assert client.get(query).status_code == 200
        assert client.delete("/traits/CUSTOM_GONE").status_code == 204
        resp = client.get(query)
        assert resp.status_code == 400
        assert "No such trait(s): CUSTOM_GONE" in resp.text


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
# SQLite writers run one at a time and a reader sees one snapshot, and a
# write forced inside another transaction would wait for its lock.


def _read_committed_only(backend: str) -> None:
    if backend == "sqlite":
        pytest.skip("needs READ COMMITTED interleaving (PostgreSQL, MariaDB)")


def test_emptying_a_consumer_created_meanwhile_keeps_its_claim(
    db: Database, backend: str, monkeypatch: Any
) -> None:
    """Emptying consumer X, not found when read, must not remove the
    allocations a concurrent request gives X before the delete runs: that
    request committed first, and its claim stands (and every cache keeps
    showing it)."""
    _read_committed_only(backend)
    body = {"project_id": "p", "user_id": "u", "consumer_type": "INSTANCE"}
    with (
        Client(create_app(make_conf(), db)) as writer,
        Client(create_app(make_conf(), Database(db.engine))) as reader,
    ):
        rp = _uuid(1)
        _hosts(writer, 1, 1)
        # The project and user rows exist first, so that neither request
        # below inserts them (the second would wait on the first's row).
        other = str(uuidlib.uuid4())
        assert (
            writer.put(
                "/allocations/%s" % other,
                json={
                    **body,
                    "consumer_generation": None,
                    "allocations": {rp: {"resources": {"VCPU": 1}}},
                },
            ).status_code
            == 204
        )
        assert writer.delete("/allocations/%s" % other).status_code == 204
        query = "/allocation_candidates?resources=VCPU:1"
        assert len(reader.get(query).json()["allocation_requests"]) == 1
        consumer = str(uuidlib.uuid4())
        real = claim.lock_providers

        def racing(conn: Any, ids: set[int]) -> None:
            monkeypatch.setattr(claim, "lock_providers", real)
            resp = writer.put(
                "/allocations/%s" % consumer,
                json={
                    **body,
                    "consumer_generation": None,
                    "allocations": {rp: {"resources": {"VCPU": 1}}},
                },
            )
            assert resp.status_code == 204, resp.text
            real(conn, ids)

        monkeypatch.setattr(claim, "lock_providers", racing)
        resp = writer.post(
            "/allocations",
            json={consumer: {**body, "consumer_generation": None, "allocations": {}}},
        )
        assert resp.status_code == 204, resp.text
        held = writer.get("/allocations/%s" % consumer).json()
        assert held["allocations"] == {rp: {"resources": {"VCPU": 1}, "generation": 3}}
        assert reader.get(query).json()["allocation_requests"] == []


def test_trait_created_during_a_refresh(db: Database, backend: str, monkeypatch: Any) -> None:
    """A trait created and set on a provider while a worker re-reads its
    world is picked up, not an unknown id (which was a 500)."""
    _read_committed_only(backend)
    with (
        Client(create_app(make_conf(), db)) as writer,
        Client(create_app(make_conf(), Database(db.engine))) as reader,
    ):
        _hosts(writer, 2, 4)
        query = "/allocation_candidates?resources=VCPU:1"
        assert reader.get(query).status_code == 200
        writer.put(
            "/resource_providers/%s/traits" % _uuid(1),
            json={"resource_provider_generation": 1, "traits": ["HW_CPU_X86_AVX2"]},
        )
        real = load._providers

        def racing(*args: Any) -> Any:
            # Between reading the names and reading the providers.
            monkeypatch.setattr(load, "_providers", real)
            assert writer.put("/traits/CUSTOM_NEW").status_code == 201
            assert (
                writer.put(
                    "/resource_providers/%s/traits" % _uuid(2),
                    json={"resource_provider_generation": 1, "traits": ["CUSTOM_NEW"]},
                ).status_code
                == 200
            )
            return real(*args)

        # (Two providers, one changed: the world is read whole.)
        monkeypatch.setattr(load, "_providers", racing)
        resp = reader.get(query + "&required=HW_CPU_X86_AVX2")
        assert resp.status_code == 200, resp.text
        assert resp.json()["allocation_requests"][0]["allocations"] == {
            _uuid(1): {"resources": {"VCPU": 1}}
        }


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


@pytest.mark.parametrize("exclusive", [False, True])
def test_a_usage_refresh_copies_the_provider_map_unless_exclusive(
    db: Database, exclusive: bool
) -> None:
    """A claim makes the next request refresh usage. A cache that others
    may read copies the provider map and leaves the old cached world as it
    was; an exclusive one updates the map in place (no copy: in a forked
    worker, a copy writes to every provider object's page)."""
    app = create_app(make_conf(), db)
    app.state.candidate_cache.exclusive = exclusive
    with Client(app) as client:
        _hosts(client, 4, 2)
        query = "/allocation_candidates?resources=VCPU:2"
        assert len(client.get(query).json()["allocation_requests"]) == 4
        before = app.state.candidate_cache.latest
        old = before.world.providers
        claimed = before.world.by_uuid[_uuid(1)]
        was = old[claimed]
        assert (
            client.put(
                "/allocations/%s" % uuidlib.uuid4(),
                json={
                    "allocations": {_uuid(1): {"resources": {"VCPU": 2}}},
                    "project_id": "p",
                    "user_id": "u",
                    "consumer_generation": None,
                    "consumer_type": "INSTANCE",
                },
            ).status_code
            == 204
        )
        assert len(client.get(query).json()["allocation_requests"]) == 3
        after = app.state.candidate_cache.latest
        assert after is not before
        assert after.world.providers[claimed].used == {"VCPU": 2}
        assert (after.world.providers is old) == exclusive
        # The old cached world kept its own provider object, or shares the
        # updated map.
        assert (before.world.providers[claimed] is was) != exclusive
