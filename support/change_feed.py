"""The change feed as a client reads it (``GET /berth/changes``,
docs/change-feed.md), for the tests of the feed, of allocation writes and
of the Galera cluster: ``position`` and ``feed`` read it, ``Replica``
rebuilds the state from nothing but its events, ``listed`` is the same
state as the API lists it, ``Walk`` makes random writes of every kind,
and ``two_trees`` a small world to filter."""

from __future__ import annotations

import random
import uuid as uuidlib
from typing import Any

from berth.db import events
from support.app_client import Client

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


def two_trees(client: Client) -> tuple[str, str, str]:
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
