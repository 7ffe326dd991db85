"""The order of allocations in answers, against upstream Placement 16.0.0
(the ``upstream`` fixture, on SQLite, where its order is that of the
index its query walks; see ``berth.domain.allocation``): the same writes,
in several orders and through every endpoint that writes allocations,
read back with the same keys in the same order (JSON objects compared as
lists of their items).

``GET /allocations/{c}`` lists providers, and each one's classes, as the
write listed them; ``GET /resource_providers/{u}/allocations`` lists the
rows by class id, amount, then as written.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx

HEADERS = {"x-roles": "admin,service"}  # the reshaper's policy, both ways
STANDARD = ["VCPU", "MEMORY_MB", "DISK_GB", "IPV4_ADDRESS"]


def ordered(value: Any) -> Any:
    """``value`` with every object a list of its items, so that equality
    compares the order of keys too."""
    if isinstance(value, dict):
        return [(k, ordered(v)) for k, v in value.items()]
    if isinstance(value, list):
        return [ordered(v) for v in value]
    return value


class World:
    """Providers and custom classes named afresh (upstream's server is
    shared by the session), the same on each server."""

    def __init__(self) -> None:
        tag = uuid.uuid4().hex[:8].upper()
        # Created B before A: their ids are the other way round to names.
        self.custom = ["CUSTOM_B%s" % tag, "CUSTOM_A%s" % tag]
        self.classes = STANDARD + self.custom
        # In uuid order, so that the orders written below are not.
        self.rps = sorted(str(uuid.uuid4()) for _ in range(4))
        self.consumers = sorted(str(uuid.uuid4()) for _ in range(4))

    def build(self, http: httpx.Client) -> None:
        for name in self.custom:
            assert http.put("/resource_classes/" + name).status_code == 201
        for rp in self.rps:
            resp = http.post("/resource_providers", json={"name": rp, "uuid": rp})
            assert resp.status_code == 200, resp.text
            resp = http.put(
                "/resource_providers/%s/inventories" % rp,
                json={
                    "resource_provider_generation": 0,
                    "inventories": {rc: {"total": 100} for rc in self.classes},
                },
            )
            assert resp.status_code == 200, resp.text

    def allocations(
        self, rps: list[int], classes: list[list[int]], amount: int = 1
    ) -> dict[str, Any]:
        """Provider ``rps[i]`` gets ``classes[i % len(classes)]``, in
        those orders."""
        return {
            self.rps[r]: {
                "resources": {
                    self.classes[c]: amount + n for n, c in enumerate(classes[i % len(classes)])
                }
            }
            for i, r in enumerate(rps)
        }


def owned(allocations: dict[str, Any], generation: int | None) -> dict[str, Any]:
    return {
        "allocations": allocations,
        "project_id": "p",
        "user_id": "u",
        "consumer_generation": generation,
        "consumer_type": "INSTANCE",
    }


def write_and_read(http: httpx.Client, world: World) -> list[Any]:
    """The same writes on ``http``, and every read after them."""

    def send(method: str, path: str, body: Any, version: str = "1.39") -> None:
        resp = http.request(
            method,
            path,
            json=body,
            headers={**HEADERS, "openstack-api-version": "placement %s" % version},
        )
        assert resp.status_code == 204, (path, resp.text)

    c0, c1, c2, c3 = world.consumers
    # Providers and classes in orders that are neither sorted nor by id.
    send(
        "PUT",
        "/allocations/" + c0,
        owned(world.allocations([3, 0, 2, 1], [[2, 0, 4, 1, 5], [5, 1, 0, 3]]), None),
    )
    send(
        "PUT",
        "/allocations/" + c1,
        owned(world.allocations([1, 2], [[5, 1, 0, 3], [2, 0, 4]], amount=3), None),
    )
    # The list form (before 1.12), then a rewrite in another order.
    send(
        "PUT",
        "/allocations/" + c2,
        {
            "allocations": [
                {
                    "resource_provider": {"uuid": world.rps[r]},
                    "resources": {world.classes[c]: 2 for c in classes},
                }
                for r, classes in ((2, [4, 0]), (0, [1, 5, 2]))
            ]
        },
        "1.0",
    )
    send("PUT", "/allocations/" + c0, owned(world.allocations([2, 1], [[5, 1, 0, 3]], amount=2), 1))
    # Two consumers in one POST, the later one new.
    send(
        "POST",
        "/allocations",
        {
            c1: owned(world.allocations([0, 3], [[0, 2], [1, 5]]), 1),
            c3: owned(world.allocations([1, 0], [[4, 0]]), None),
        },
    )
    reads = [http.get("/allocations/" + c).json() for c in world.consumers]
    reads += [http.get("/resource_providers/%s/allocations" % rp).json() for rp in world.rps]
    # The reshaper moves c3 to providers 3 then 2, leaving inventories.
    inventories = {
        rp: {
            "resource_provider_generation": http.get("/resource_providers/" + rp).json()[
                "generation"
            ],
            "inventories": {rc: {"total": 100} for rc in world.classes},
        }
        for rp in world.rps
    }
    send(
        "POST",
        "/reshaper",
        {
            "inventories": inventories,
            "allocations": {c3: owned(world.allocations([3, 2], [[5, 2, 0]]), 1)},
        },
    )
    reads += [http.get("/allocations/" + world.consumers[3]).json()]
    reads += [http.get("/resource_providers/%s/allocations" % rp).json() for rp in world.rps[2:]]
    return ordered(reads)


def test_allocations_read_in_upstreams_order(client: Any, upstream: httpx.Client) -> None:
    world = World()
    world.build(client)
    world.build(upstream)
    expected = write_and_read(upstream, world)
    assert write_and_read(client, world) == expected
    # Neither sorted by uuid nor by name, so the comparison tells.
    by_consumer, by_provider = expected[:4], expected[4:8]
    assert any(_keys(read) != sorted(_keys(read)) for read in by_consumer)
    assert any(_keys(read) != sorted(_keys(read)) for read in by_provider)
    classes = [
        [c for c, _ in dict(entry)["resources"]]
        for read in expected
        for _, entry in dict(read)["allocations"]
    ]
    assert any(c != sorted(c) for c in classes)


def _keys(read: Any) -> list[str]:
    return [key for key, _ in dict(read)["allocations"]]
