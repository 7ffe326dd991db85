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

from berth.api.app import create_app
from berth.db.engine import Database
from berth.domain.allocation_candidate import load, world_patch
from berth.domain.allocation_candidate.cache import Refresh
from berth.domain.allocation_candidate.world import World
from support.candidate_worlds import assert_same
from support.numbered_providers import hosts, uuid
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
        rp = uuid(self.next)
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
        hosts(writer, 12, 4)
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
