"""The change feed (``GET /berth/changes``, docs/change-feed.md): every
read says its position; replaying the events after a listing's position
rebuilds the state exactly; pruned history answers 410; bad queries 400;
policy narrows a project reader to its own project's consumers."""

from __future__ import annotations

import random
import time
import uuid as uuidlib
from typing import Any

import pytest

from berth.db import events
from berth.db.engine import Database
from support.plain_words import plain_line
from tests.conftest import Client

PROJECTS = ["proj-a", "proj-b"]
USERS = ["user-a", "user-b"]
INVENTORY_CLASSES = ["VCPU", "MEMORY_MB", "DISK_GB"]


def position(client: Client) -> str:
    """The position a fresh read reflects."""
    resp = client.get("/resource_classes")
    assert resp.status_code == 200
    return resp.headers["berth-position"]


def feed(client: Client, after: str, **filters: str) -> list[dict[str, Any]]:
    """Every event after ``after`` (all pages), checking each page's
    position moves on."""
    found: list[dict[str, Any]] = []
    while True:
        resp = client.get("/berth/changes", params={"after": after, "limit": "7", **filters})
        assert resp.status_code == 200, resp.text
        page = resp.json()
        found += page["events"]
        if not page["more"]:
            return found
        assert page["position"] != after
        after = page["position"]


class Replica:
    """The state the events describe, built from nothing but them."""

    def __init__(self) -> None:
        self.providers: dict[str, dict[str, Any]] = {}
        self.consumers: dict[str, dict[str, Any]] = {}
        self.classes: set[str] = set()
        self.traits: set[str] = set()

    def apply(self, event: dict[str, Any]) -> None:
        kind, subject, new = event["kind"], event["subject"], event["new"]
        if kind in (events.PROVIDER_CREATED, events.PROVIDER_UPDATED):
            entry = self.providers.setdefault(
                subject, {"inventories": {}, "traits": [], "aggregates": []}
            )
            entry.update(
                name=new["name"], generation=new["generation"], parent=new["parent_provider_uuid"]
            )
        elif kind == events.PROVIDER_DELETED:
            del self.providers[subject]
        elif kind in (events.INVENTORIES_SET, events.TRAITS_SET, events.AGGREGATES_SET):
            field = kind.split(".")[0]
            self.providers[subject][field] = new[field]
            self.providers[subject]["generation"] = new["generation"]
        elif kind in events.ALLOCATION_KINDS:
            for rp, gen in new["resource_provider_generations"].items():
                self.providers[rp]["generation"] = gen
            if kind == events.ALLOCATIONS_REMOVED:
                self.consumers.pop(subject, None)
            else:
                self.consumers[subject] = {
                    k: new[k]
                    for k in (
                        "allocations",
                        "project_id",
                        "user_id",
                        "consumer_type",
                        "consumer_generation",
                    )
                }
        elif kind == events.RESOURCE_CLASS_CREATED:
            self.classes.add(subject)
        elif kind == events.RESOURCE_CLASS_UPDATED:
            self.rename_class(event["old"]["name"], subject)
        elif kind == events.RESOURCE_CLASS_DELETED:
            self.classes.discard(subject)
        elif kind == events.TRAIT_CREATED:
            self.traits.add(subject)
        elif kind == events.TRAIT_DELETED:
            self.traits.discard(subject)
        else:
            raise AssertionError("unexpected event %r" % event)

    def rename_class(self, old: str, new: str) -> None:
        """Inventories and allocations name the class by its new name."""
        self.classes.discard(old)
        self.classes.add(new)
        holders = [p["inventories"] for p in self.providers.values()] + [
            res for c in self.consumers.values() for res in c["allocations"].values()
        ]
        for amounts in holders:
            if old in amounts:
                amounts[new] = amounts.pop(old)

    def state(self) -> dict[str, Any]:
        def root(uuid: str) -> str:
            while self.providers[uuid]["parent"] is not None:
                uuid = self.providers[uuid]["parent"]
            return uuid

        providers = {
            uuid: {
                "name": p["name"],
                "generation": p["generation"],
                "parent": p["parent"],
                "root": root(uuid),
                "inventories": p["inventories"],
                "traits": sorted(p["traits"]),
                "aggregates": sorted(p["aggregates"]),
            }
            for uuid, p in self.providers.items()
        }
        consumers = {
            uuid: {**c, "consumer_type": c["consumer_type"] or "unknown"}
            for uuid, c in self.consumers.items()
        }
        return {
            "providers": providers,
            "consumers": consumers,
            "classes": self.classes,
            "traits": self.traits,
        }


def listed(client: Client) -> dict[str, Any]:
    """The same state as the API lists it."""
    providers: dict[str, Any] = {}
    consumers: dict[str, Any] = {}
    for rp in client.get("/resource_providers").json()["resource_providers"]:
        base = "/resource_providers/%s" % rp["uuid"]
        inventories = client.get(base + "/inventories").json()["inventories"]
        providers[rp["uuid"]] = {
            "name": rp["name"],
            "generation": rp["generation"],
            "parent": rp["parent_provider_uuid"],
            "root": rp["root_provider_uuid"],
            "inventories": {
                rc: {**inv, "allocation_ratio": float(inv["allocation_ratio"])}
                for rc, inv in inventories.items()
            },
            "traits": sorted(client.get(base + "/traits").json()["traits"]),
            "aggregates": sorted(client.get(base + "/aggregates").json()["aggregates"]),
        }
        held = client.get(base + "/allocations").json()["allocations"]
        for consumer in held:
            if consumer in consumers:
                continue
            got = client.get("/allocations/%s" % consumer).json()
            consumers[consumer] = {
                "allocations": {p: a["resources"] for p, a in got["allocations"].items()},
                "project_id": got["project_id"],
                "user_id": got["user_id"],
                "consumer_type": got["consumer_type"],
                "consumer_generation": got["consumer_generation"],
            }
    classes = {
        c["name"]
        for c in client.get("/resource_classes").json()["resource_classes"]
        if c["name"].startswith("CUSTOM_")
    }
    traits = set(client.get("/traits", params={"name": "startswith:CUSTOM_"}).json()["traits"])
    return {"providers": providers, "consumers": consumers, "classes": classes, "traits": traits}


class Walk:
    """Random writes through the API, valid or not."""

    def __init__(self, client: Client, rng: random.Random) -> None:
        self.client, self.rng = client, rng
        self.consumers: list[str] = []

    def providers(self) -> list[dict[str, Any]]:
        return list(self.client.get("/resource_providers").json()["resource_providers"])

    def pick(self) -> dict[str, Any] | None:
        found = self.providers()
        return self.rng.choice(found) if found else None

    def step(self) -> None:
        ops = [
            self.create,
            self.create,
            self.rename,
            self.move,
            self.delete,
            self.inventories,
            self.inventories,
            self.traits,
            self.aggregates,
            self.custom_class,
            self.custom_trait,
            self.allocate,
            self.allocate,
            self.allocate,
            self.allocate_many,
            self.remove,
            self.empty,
            self.delete_custom,
            self.delete_custom,
            self.rename_class,
            self.one_inventory,
            self.one_inventory,
            self.drop_traits,
            self.aggregates,
        ]
        self.rng.choice(ops)()

    def create(self) -> None:
        parent = self.pick() if self.rng.random() < 0.5 else None
        body: dict[str, Any] = {"name": "rp-%d" % self.rng.randrange(10**9)}
        if parent is not None:
            body["parent_provider_uuid"] = parent["uuid"]
        self.client.post("/resource_providers", json=body)

    def rename(self) -> None:
        rp = self.pick()
        if rp is not None:
            self.client.put(
                "/resource_providers/%s" % rp["uuid"],
                json={
                    "name": "renamed-%d" % self.rng.randrange(10**9),
                    "parent_provider_uuid": rp["parent_provider_uuid"],
                },
            )

    def move(self) -> None:
        found = self.providers()
        parents = {p["parent_provider_uuid"] for p in found}
        leaves = [p for p in found if p["uuid"] not in parents]
        if not leaves:
            return
        rp = self.rng.choice(leaves)
        others = [p["uuid"] for p in found if p["uuid"] != rp["uuid"]]
        parent = self.rng.choice(others + [None])
        self.client.put(
            "/resource_providers/%s" % rp["uuid"],
            json={"name": rp["name"], "parent_provider_uuid": parent},
        )

    def delete(self) -> None:
        rp = self.pick()
        if rp is not None:
            self.client.delete("/resource_providers/%s" % rp["uuid"])

    def inventories(self) -> None:
        rp = self.pick()
        if rp is None:
            return
        classes = INVENTORY_CLASSES + sorted(
            c["name"]
            for c in self.client.get("/resource_classes").json()["resource_classes"]
            if c["name"].startswith("CUSTOM_")
        )
        chosen = self.rng.sample(classes, self.rng.randint(0, 3))
        self.client.put(
            "/resource_providers/%s/inventories" % rp["uuid"],
            json={
                "resource_provider_generation": rp["generation"],
                "inventories": {
                    rc: {
                        "total": self.rng.randint(8, 64),
                        "reserved": self.rng.randint(0, 2),
                        "allocation_ratio": self.rng.choice([1.0, 1.5, 16.0]),
                    }
                    for rc in chosen
                },
            },
        )

    def one_inventory(self) -> None:
        """One class added, changed or removed, or all removed: each of
        these writers records its event from what it read and wrote."""
        rp = self.pick()
        if rp is None:
            return
        base = "/resource_providers/%s/inventories" % rp["uuid"]
        have = sorted(self.client.get(base).json()["inventories"])
        rc = self.rng.choice(INVENTORY_CLASSES)
        fields = {"total": self.rng.randint(8, 64), "allocation_ratio": self.rng.choice([1.0, 2.5])}
        gen = {"resource_provider_generation": rp["generation"]}
        choice = self.rng.randrange(4)
        if choice == 0:
            self.client.post(base, json={"resource_class": rc, **gen, **fields})
        elif choice == 1 and have:
            self.client.put(base + "/" + self.rng.choice(have), json={**gen, **fields})
        elif choice == 2 and have:
            self.client.delete(base + "/" + self.rng.choice(have))
        else:
            self.client.delete(base)

    def drop_traits(self) -> None:
        rp = self.pick()
        if rp is not None:
            self.client.delete("/resource_providers/%s/traits" % rp["uuid"])

    def traits(self) -> None:
        rp = self.pick()
        if rp is None:
            return
        known = ["HW_CPU_X86_AVX2", "COMPUTE_VOLUME_MULTI_ATTACH"] + list(
            self.client.get("/traits", params={"name": "startswith:CUSTOM_"}).json()["traits"]
        )
        chosen = self.rng.sample(known, self.rng.randint(0, len(known)))
        self.client.put(
            "/resource_providers/%s/traits" % rp["uuid"],
            json={"resource_provider_generation": rp["generation"], "traits": chosen},
        )

    def aggregates(self) -> None:
        rp = self.pick()
        if rp is None:
            return
        pool = ["7e3b1a2c-0000-4000-8000-00000000000%d" % i for i in range(4)]
        chosen = self.rng.sample(pool, self.rng.randint(0, 3))
        path = "/resource_providers/%s/aggregates" % rp["uuid"]
        if self.rng.random() < 0.5:  # before 1.19: no generation moves
            self.client.at("1.18").put(path, json=chosen)
        else:
            self.client.put(
                path, json={"resource_provider_generation": rp["generation"], "aggregates": chosen}
            )

    def custom_class(self) -> None:
        self.client.put("/resource_classes/CUSTOM_C%d" % self.rng.randrange(3))

    def custom_trait(self) -> None:
        self.client.put("/traits/CUSTOM_T%d" % self.rng.randrange(3))

    def rename_class(self) -> None:
        """The microversion 1.2-1.6 rename of a custom class."""
        custom = [
            c["name"]
            for c in self.client.get("/resource_classes").json()["resource_classes"]
            if c["name"].startswith("CUSTOM_")
        ]
        if custom:
            self.client.at("1.6").put(
                "/resource_classes/%s" % self.rng.choice(custom),
                json={"name": "CUSTOM_C%d" % self.rng.randrange(6)},
            )

    def delete_custom(self) -> None:
        if self.rng.random() < 0.5:  # one no inventory has, mostly
            used = {
                rc
                for rp in self.providers()
                for rc in self.client.get("/resource_providers/%s/inventories" % rp["uuid"]).json()[
                    "inventories"
                ]
            }
            free = [
                c["name"]
                for c in self.client.get("/resource_classes").json()["resource_classes"]
                if c["name"].startswith("CUSTOM_") and c["name"] not in used
            ]
            self.client.delete("/resource_classes/%s" % self.rng.choice(free + ["CUSTOM_C0"]))
        else:  # one no provider has, mostly
            free = self.client.get(
                "/traits", params={"name": "startswith:CUSTOM_", "associated": "false"}
            ).json()
            name = self.rng.choice(free["traits"] + ["CUSTOM_T0"])
            self.client.delete("/traits/%s" % name)

    def _allocation(self, consumer: str) -> dict[str, Any] | None:
        with_inventory = []
        for rp in self.providers():
            inv = self.client.get("/resource_providers/%s/inventories" % rp["uuid"]).json()[
                "inventories"
            ]
            if inv:
                with_inventory.append((rp["uuid"], inv))
        if not with_inventory:
            return None
        chosen = self.rng.sample(with_inventory, min(len(with_inventory), 2))
        current = self.client.get("/allocations/%s" % consumer).json()
        return {
            "allocations": {
                rp: {
                    "resources": {
                        rc: self.rng.randint(1, 3) for rc in self.rng.sample(sorted(inv), 1)
                    }
                }
                for rp, inv in chosen
            },
            "project_id": self.rng.choice(PROJECTS),
            "user_id": self.rng.choice(USERS),
            "consumer_generation": current.get("consumer_generation"),
            "consumer_type": self.rng.choice(["INSTANCE", "MIGRATION"]),
        }

    def consumer(self) -> str:
        if self.consumers and self.rng.random() < 0.5:
            return self.rng.choice(self.consumers)
        made = str(uuidlib.UUID(int=self.rng.getrandbits(128), version=4))
        self.consumers.append(made)
        return made

    def allocate(self) -> None:
        consumer = self.consumer()
        body = self._allocation(consumer)
        if body is not None:
            self.client.put("/allocations/%s" % consumer, json=body)

    def allocate_many(self) -> None:
        wanted = {}
        for consumer in {self.consumer(), self.consumer()}:
            body = self._allocation(consumer)
            if body is None:
                return
            wanted[consumer] = body
        self.client.post("/allocations", json=wanted)

    def remove(self) -> None:
        if self.consumers:
            self.client.delete("/allocations/%s" % self.rng.choice(self.consumers))

    def empty(self) -> None:
        if not self.consumers:
            return
        consumer = self.rng.choice(self.consumers)
        current = self.client.get("/allocations/%s" % consumer).json()
        self.client.put(
            "/allocations/%s" % consumer,
            json={
                "allocations": {},
                "project_id": PROJECTS[0],
                "user_id": USERS[0],
                "consumer_type": "INSTANCE",
                "consumer_generation": current.get("consumer_generation"),
            },
        )


@pytest.mark.parametrize("seed", [1, 2])
def test_replayed_events_rebuild_the_state(client: Client, seed: int) -> None:
    start = position(client)
    walk = Walk(client, random.Random(seed))
    for _ in range(160):
        walk.step()
    replica = Replica()
    got = feed(client, start)
    for event in got:
        replica.apply(event)
    want = listed(client)
    assert want["providers"], "the walk made no provider"
    assert want["consumers"], "the walk made no consumer"
    assert replica.state() == want
    # The walk made every kind of write (the seeds are chosen so).
    assert {e["kind"] for e in got} == set(events.KINDS) - {events.RESYNC}
    # Events are in order and each write's events under one position.
    seqs = [tuple(map(int, e["position"].split(":"))) for e in got]
    assert seqs == sorted(seqs)


def test_replay_from_a_middle_position_is_idempotent(client: Client) -> None:
    """A listing taken at some position, then the events after it,
    gives the same state as replaying everything (and replaying events
    the listing already reflects changes nothing)."""
    start = position(client)
    walk = Walk(client, random.Random(7))
    for _ in range(40):
        walk.step()
    middle = position(client)
    replica = Replica()
    for event in feed(client, start):
        replica.apply(event)
    for _ in range(40):
        walk.step()
    for event in feed(client, middle):
        replica.apply(event)
    again = feed(client, start)
    for event in again:  # everything once more: nothing changes
        replica.apply(event)
    assert replica.state() == listed(client)


def test_every_read_says_its_position(client: Client) -> None:
    before = position(client)
    resp = client.post("/resource_providers", json={"name": "one"})
    assert resp.status_code == 200
    after = position(client)
    assert after != before
    events_after = feed(client, before)
    assert [e["kind"] for e in events_after] == [events.PROVIDER_CREATED]
    assert events_after[0]["position"] == after
    assert feed(client, after) == []
    for url in ("/", "/resource_providers", "/traits", "/usages?project_id=x"):
        assert client.get(url).headers["berth-position"] == after


def _world(client: Client) -> tuple[str, str, str]:
    """Two trees and a consumer of project proj-a on the first."""
    root = client.post("/resource_providers", json={"name": "root"}).json()
    child = client.post(
        "/resource_providers", json={"name": "child", "parent_provider_uuid": root["uuid"]}
    ).json()
    other = client.post("/resource_providers", json={"name": "other"}).json()
    for rp in (child, other):
        client.put(
            "/resource_providers/%s/inventories" % rp["uuid"],
            json={
                "resource_provider_generation": rp["generation"],
                "inventories": {"VCPU": {"total": 8}},
            },
        )
    consumer = str(uuidlib.uuid4())
    resp = client.put(
        "/allocations/%s" % consumer,
        json={
            "allocations": {child["uuid"]: {"resources": {"VCPU": 2}}},
            "project_id": "proj-a",
            "user_id": "u",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        },
    )
    assert resp.status_code == 204, resp.text
    resp = client.put(
        "/allocations/%s" % uuidlib.uuid4(),
        json={
            "allocations": {other["uuid"]: {"resources": {"VCPU": 1}}},
            "project_id": "proj-b",
            "user_id": "u",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        },
    )
    assert resp.status_code == 204, resp.text
    return root["uuid"], other["uuid"], consumer


def test_filters(client: Client) -> None:
    start = position(client)
    root, other, consumer = _world(client)
    kinds = [e["kind"] for e in feed(client, start, kind="inventories.set")]
    assert kinds == ["inventories.set"] * 2
    by_consumer = feed(client, start, consumer=consumer)
    assert [(e["kind"], e["subject"]) for e in by_consumer] == [
        (events.ALLOCATIONS_REPLACED, consumer)
    ]
    assert by_consumer[0]["new"]["project_id"] == "proj-a"
    assert by_consumer[0]["old"] is None
    by_project = feed(client, start, project="proj-b")
    assert [e["new"]["project_id"] for e in by_project] == ["proj-b"]
    tree = feed(client, start, tree=root)
    assert [e["kind"] for e in tree] == [
        events.PROVIDER_CREATED,
        events.PROVIDER_CREATED,
        events.INVENTORIES_SET,
        events.ALLOCATIONS_REPLACED,
    ]
    assert all(other not in str(e) for e in tree)


def test_a_tree_filter_names_several_trees(client: Client) -> None:
    """``tree=a,b``: the events of either tree (any provider of a tree
    names it), as one filter each would give them together."""
    start = position(client)
    root, other, _ = _world(client)
    third = client.post("/resource_providers", json={"name": "third"})
    assert third.status_code == 200
    child = [
        rp["uuid"]
        for rp in client.get("/resource_providers", params={"in_tree": root}).json()[
            "resource_providers"
        ]
        if rp["uuid"] != root
    ]
    both = feed(client, start, tree="%s,%s" % (child[0], other.upper()))
    alone = feed(client, start, tree=root) + feed(client, start, tree=other)
    assert sorted(e["position"] for e in both) == sorted(e["position"] for e in alone)
    assert len(both) == 7
    assert third.json()["uuid"] not in str(both)
    # A provider moved out of a tree is an event of that tree too.
    moved = client.put(
        "/resource_providers/%s" % child[0],
        json={"name": "child", "parent_provider_uuid": third.json()["uuid"]},
    )
    assert moved.status_code == 200, moved.text
    last = feed(client, start, tree=root)[-1]
    assert (last["kind"], last["subject"]) == (events.PROVIDER_UPDATED, child[0])
    for bad in ("%s,not-a-uuid" % root, ",".join([root] * 101), root + ","):
        resp = client.get("/berth/changes", params={"after": start, "tree": bad})
        assert resp.status_code == 400, (bad, resp.text)


def test_events_carry_old_and_new_values(client: Client) -> None:
    rp = client.post("/resource_providers", json={"name": "a"}).json()
    start = position(client)
    client.put(
        "/resource_providers/%s/traits" % rp["uuid"],
        json={"resource_provider_generation": 0, "traits": ["HW_CPU_X86_AVX2"]},
    )
    client.put("/resource_providers/%s" % rp["uuid"], json={"name": "b"})
    client.put(
        "/resource_providers/%s/traits" % rp["uuid"],
        json={"resource_provider_generation": 1, "traits": []},
    )
    got = feed(client, start)
    assert [(e["kind"], e["old"], e["new"]) for e in got] == [
        (
            events.TRAITS_SET,
            {"generation": 0, "traits": []},
            {"generation": 1, "traits": ["HW_CPU_X86_AVX2"]},
        ),
        (
            events.PROVIDER_UPDATED,
            {
                "name": "a",
                "generation": 1,
                "parent_provider_uuid": None,
                "root_provider_uuid": rp["uuid"],
            },
            {
                "name": "b",
                "generation": 1,
                "parent_provider_uuid": None,
                "root_provider_uuid": rp["uuid"],
            },
        ),
        (
            events.TRAITS_SET,
            {"generation": 1, "traits": ["HW_CPU_X86_AVX2"]},
            {"generation": 2, "traits": []},
        ),
    ]


def test_an_owner_change_shows_the_old_owner_as_old(client: Client) -> None:
    root, other, consumer = _world(client)
    child = client.get("/resource_providers", params={"in_tree": root}).json()["resource_providers"]
    child_uuid = next(p["uuid"] for p in child if p["uuid"] != root)
    start = position(client)
    for project, user, allocations in (
        ("proj-b", "v", {other: {"resources": {"VCPU": 1}}}),
        ("proj-a", "u", {}),
    ):
        generation = client.get("/allocations/%s" % consumer).json()["consumer_generation"]
        resp = client.put(
            "/allocations/%s" % consumer,
            json={
                "allocations": allocations,
                "project_id": project,
                "user_id": user,
                "consumer_generation": generation,
                "consumer_type": "MIGRATION",
            },
        )
        assert resp.status_code == 204, resp.text
    got = feed(client, start, consumer=consumer)
    assert [(e["kind"], e["old"]) for e in got] == [
        (
            events.ALLOCATIONS_REPLACED,
            {
                "allocations": {child_uuid: {"VCPU": 2}},
                "project_id": "proj-a",
                "user_id": "u",
                "consumer_type": "INSTANCE",
            },
        ),
        (
            events.ALLOCATIONS_REMOVED,
            {
                "allocations": {other: {"VCPU": 1}},
                "project_id": "proj-b",
                "user_id": "v",
                "consumer_type": "MIGRATION",
            },
        ),
    ]
    assert (
        got[0]["new"]["project_id"],
        got[0]["new"]["user_id"],
        got[0]["new"]["consumer_type"],
    ) == ("proj-b", "v", "MIGRATION")


@pytest.mark.parametrize(
    "query",
    [
        {},
        {"after": "x"},
        {"after": "1:"},
        {"after": "1:2,1:3"},
        {"after": "-1:2"},
        {"after": "0", "kind": "provider.exploded"},
        {"after": "0", "tree": "not-a-uuid"},
        {"after": "0", "limit": "0"},
        {"after": "0", "consumer": "nope"},
        {"after": "0", "colour": "red"},
        # Longer than any cluster's position: refused before it is parsed.
        {"after": ",".join("%d:1" % n for n in range(1, 80))},
    ],
)
def test_bad_queries_are_400(client: Client, query: dict[str, str]) -> None:
    resp = client.get("/berth/changes", params=query)
    assert resp.status_code == 400, resp.text
    assert resp.json()["errors"][0]["status"] == 400


#: The kinds, as a refusal lists them.
KINDS = (
    "provider/resource_class.created/updated/deleted, "
    "inventories/traits/aggregates.set, allocations.replaced/removed, "
    "trait.created/deleted, resync"
)


@pytest.mark.parametrize(
    ("query", "line"),
    [
        (
            {"after": "0", "kind": "provider.create"},
            "unknown kind 'provider.create'; kinds: " + KINDS,
        ),
        ({"after": "0", "kind": "resync,bogus"}, "unknown kind 'bogus'; kinds: " + KINDS),
        ({"after": "0", "limit": "abc"}, "limit must be a whole number from 1 to 99999, not 'abc'"),
        ({"after": "0", "consumer": "nope"}, "consumer must be a consumer uuid, not 'nope'"),
        ({"afte": "0"}, "unknown query parameter 'afte' (did you mean after?)"),
        ({}, "after is required: a position from an earlier answer, or 0"),
    ],
)
def test_bad_queries_say_so_in_plain_words(
    client: Client, query: dict[str, str], line: str
) -> None:
    """A Berth-only surface: no pattern or schema in the answer, which
    ``berth watch`` prints as it is."""
    from berth.api.errors import for_people

    resp = client.get("/berth/changes", params=query)
    assert resp.status_code == 400, resp.text
    error = resp.json()["errors"][0]
    assert error["code"] == "placement.query.bad_value"
    assert plain_line(for_people(error["detail"])) == line
    assert len(resp.content) < 600


def test_a_bad_kind_lists_every_kind() -> None:
    named = set()
    for part in KINDS.split(", "):
        prefixes, _, suffixes = part.rpartition(".")
        named.update(
            "%s.%s" % (p, s) if p else s for p in prefixes.split("/") for s in suffixes.split("/")
        )
    assert named == set(events.KINDS)


def test_pruned_history_is_410(client: Client, db: Database) -> None:
    start = position(client)
    client.post("/resource_providers", json={"name": "gone"})
    middle = position(client)
    client.post("/resource_providers", json={"name": "kept"})
    # Prune everything written before now, as a write's flush does once
    # the retention has passed.
    slot, seq = (int(x) for x in middle.split(":"))
    db.run(lambda conn: events.prune(conn, slot, time.time() + 1))
    resp = client.get("/berth/changes", params={"after": start})
    assert resp.status_code == 410, resp.text
    error = resp.json()["errors"][0]
    assert error["code"] == "berth.changes.gone"
    newest = position(client)
    assert error["oldest_position"] == newest
    assert newest in error["detail"]
    # From the oldest position kept, reading on works (nothing newer).
    assert feed(client, newest) == []
    # A position the database never reached is no better.
    slot, seq = (int(x) for x in newest.split(":"))
    resp = client.get("/berth/changes", params={"after": "%d:%d" % (slot, seq + 5)})
    assert resp.status_code == 410


def test_retention_prunes_on_write(conf: Any, db: Database) -> None:
    """Every PRUNE_EVERY-th write prunes events older than the retention
    (here 0 seconds: everything before that write)."""
    from berth.api.app import create_app
    from berth.db import changes

    conf.set_override("change_feed_retention", 0, group="berth")
    client = Client(create_app(conf, db))
    start = position(client)
    slot, seq = (int(x) for x in start.split(":")) if start != "0" else (1, 0)
    for i in range(changes.PRUNE_EVERY - seq % changes.PRUNE_EVERY):
        client.put("/traits/CUSTOM_PRUNE_%d" % i)
    resp = client.get("/berth/changes", params={"after": start})
    assert resp.status_code == 410
    assert resp.json()["errors"][0]["oldest_position"] == position(client)


@pytest.mark.parametrize("new_defaults", [False, True])
def test_a_project_reader_sees_its_own_consumers_only(db: Database, new_defaults: bool) -> None:
    from berth.api.app import create_app
    from tests.conftest import make_conf

    app = create_app(make_conf(oslo_policy__enforce_new_defaults=new_defaults), db)
    admin = Client(app)
    start = position(admin)
    _, _, consumer = _world(admin)
    reader = Client(app, token="alice:proj-a")
    reader.headers["x-roles"] = "reader"
    # Without its project, or with another one: refused.
    for params in ({"after": start}, {"after": start, "project": "proj-b"}):
        resp = reader.get("/berth/changes", params=params)
        assert resp.status_code == 403, resp.text
    got = feed(reader, start, project="proj-a")
    assert [(e["kind"], e["subject"]) for e in got] == [(events.ALLOCATIONS_REPLACED, consumer)]
    # Asking for provider events changes nothing: none are shown.
    assert feed(reader, start, project="proj-a", kind="provider.created") == []
    nobody = Client(app, token="bob:proj-a")
    nobody.headers["x-roles"] = "member-of-nothing"
    resp = nobody.get("/berth/changes", params={"after": start, "project": "proj-a"})
    assert resp.status_code == 403


def test_a_reshape_replays(client: Client) -> None:
    """Inventories and allocations moved in one transaction: their
    events rebuild the state, generations included."""
    start = position(client)
    root = client.post("/resource_providers", json={"name": "cn"}).json()
    client.put(
        "/resource_providers/%s/inventories" % root["uuid"],
        json={
            "resource_provider_generation": 0,
            "inventories": {"VCPU": {"total": 8}, "DISK_GB": {"total": 100}},
        },
    )
    consumer = str(uuidlib.uuid4())
    resp = client.put(
        "/allocations/%s" % consumer,
        json={
            "allocations": {root["uuid"]: {"resources": {"VCPU": 2, "DISK_GB": 10}}},
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        },
    )
    assert resp.status_code == 204, resp.text
    child = client.post(
        "/resource_providers", json={"name": "numa0", "parent_provider_uuid": root["uuid"]}
    ).json()
    generation = client.get("/resource_providers/%s" % root["uuid"]).json()["generation"]
    resp = client.post(
        "/reshaper",
        headers={"x-roles": "service"},
        json={
            "inventories": {
                root["uuid"]: {
                    "resource_provider_generation": generation,
                    "inventories": {"DISK_GB": {"total": 100}},
                },
                child["uuid"]: {
                    "resource_provider_generation": 0,
                    "inventories": {"VCPU": {"total": 8}},
                },
            },
            "allocations": {
                consumer: {
                    "allocations": {
                        root["uuid"]: {"resources": {"DISK_GB": 10}},
                        child["uuid"]: {"resources": {"VCPU": 2}},
                    },
                    "project_id": "p",
                    "user_id": "u",
                    "consumer_generation": 1,
                    "consumer_type": "INSTANCE",
                }
            },
        },
    )
    assert resp.status_code == 204, resp.text
    replica = Replica()
    got = feed(client, start)
    for event in got:
        replica.apply(event)
    assert replica.state() == listed(client)
    # The reshape is one write: its events share one position.
    last = [e for e in got if e["position"] == got[-1]["position"]]
    assert sorted(e["kind"] for e in last) == [
        events.ALLOCATIONS_REPLACED,
        events.INVENTORIES_SET,
        events.INVENTORIES_SET,
    ]


def test_berth_watch_prints_json_lines(tmp_path: Any, capsys: Any) -> None:
    """``berth watch --once`` over the configured database: one JSON line
    per event, each with the position to resume from after it; a
    position the database never reached is one error line."""
    import json

    from berth import conf as berth_conf
    from berth.cli.run import main
    from berth.direct import PlacementDirect

    conf_file = tmp_path / "placement.conf"
    conf_file.write_text(
        "[api]\nauth_strategy = noauth2\n"
        "[placement_database]\nconnection = sqlite:///%s\n" % (tmp_path / "watch.sqlite")
    )
    args = ["--config-file", str(conf_file)]
    assert main(["db", "sync", *args]) == 0
    with PlacementDirect(berth_conf.load(args), microversion="latest") as h:
        start = h.get("/").headers["berth-position"]
        a = h.post("/resource_providers", json={"name": "a"}).json()
        h.put("/traits/CUSTOM_WATCHED")
        h.post("/resource_providers", json={"name": "b"})
    capsys.readouterr()
    assert main(["watch", "--once", "--after", start, *args]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(e["kind"], e["subject"]) for e in lines[:2]] == [
        (events.PROVIDER_CREATED, a["uuid"]),
        (events.TRAIT_CREATED, "CUSTOM_WATCHED"),
    ]
    assert len(lines) == 3
    assert (
        main(["watch", "--once", "--after", lines[0]["after"], "--kind", "provider.created", *args])
        == 0
    )
    again = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["new"]["name"] for e in again] == ["b"]
    with pytest.raises(SystemExit) as bad:
        main(["watch", "--once", "--after", "1:999", *args])
    assert "is ahead of this database" in str(bad.value)
