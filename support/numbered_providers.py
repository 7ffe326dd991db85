"""A world built through the HTTP API with numbered providers (provider
``n`` has the uuid ``uuid(n)``), for the allocation-candidate, explain
and fit tests: inventories, traits, aggregates, claims and the candidates
asked for."""

from __future__ import annotations

import uuid as uuidlib
from typing import Any

import httpx

AGG = "5e9a2b1c-0000-4000-8000-00000000000a"


def uuid(n: int) -> str:
    return "00000000-0000-4000-8000-%012d" % n


def provider(client: httpx.Client, n: int, parent: int | None = None) -> str:
    body: dict[str, Any] = {"name": "rp%d" % n, "uuid": uuid(n)}
    if parent is not None:
        body["parent_provider_uuid"] = uuid(parent)
    assert client.post("/resource_providers", json=body).status_code == 200
    return uuid(n)


def generation(client: httpx.Client, rp: str) -> int:
    return int(client.get("/resource_providers/%s" % rp).json()["generation"])


def inventory(client: httpx.Client, rp: str, **totals: int) -> None:
    body = {
        "resource_provider_generation": generation(client, rp),
        "inventories": {rc: {"total": n} for rc, n in totals.items()},
    }
    resp = client.put("/resource_providers/%s/inventories" % rp, json=body)
    assert resp.status_code == 200, resp.text


def traits(client: httpx.Client, rp: str, *names: str) -> None:
    for name in names:
        if name.startswith("CUSTOM_"):
            client.put("/traits/%s" % name)
    body = {"resource_provider_generation": generation(client, rp), "traits": list(names)}
    resp = client.put("/resource_providers/%s/traits" % rp, json=body)
    assert resp.status_code == 200, resp.text


def aggregates(client: httpx.Client, rp: str, *aggs: str) -> None:
    body = {"resource_provider_generation": generation(client, rp), "aggregates": list(aggs)}
    resp = client.put("/resource_providers/%s/aggregates" % rp, json=body)
    assert resp.status_code == 200, resp.text


def allocate(client: httpx.Client, rp: str, **amounts: int) -> None:
    body = {
        "allocations": {rp: {"resources": amounts}},
        "project_id": "p",
        "user_id": "u",
        "consumer_generation": None,
        "consumer_type": "INSTANCE",
    }
    resp = client.put("/allocations/%s" % uuidlib.uuid4(), json=body)
    assert resp.status_code == 204, resp.text


def candidates(client: httpx.Client, query: str) -> dict[str, Any]:
    resp = client.get("/allocation_candidates?" + query)
    assert resp.status_code == 200, resp.text
    return resp.json()  # type: ignore[no-any-return]


def pool_world(client: httpx.Client) -> None:
    """Two compute nodes and a disk pool they share."""
    for n in (1, 2):
        provider(client, n)
        inventory(client, uuid(n), VCPU=8, MEMORY_MB=4096)
        aggregates(client, uuid(n), AGG)
    provider(client, 3)
    inventory(client, uuid(3), DISK_GB=1000)
    traits(client, uuid(3), "MISC_SHARES_VIA_AGGREGATE")
    aggregates(client, uuid(3), AGG)


def hosts(client: httpx.Client, count: int, vcpu: int) -> None:
    """Providers h1..h<count> (provider ``n`` has the uuid ``uuid(n)``),
    each with ``vcpu`` VCPU."""
    for n in range(1, count + 1):
        assert (
            client.post(
                "/resource_providers", json={"name": "h%d" % n, "uuid": uuid(n)}
            ).status_code
            == 200
        )
        assert (
            client.put(
                "/resource_providers/%s/inventories" % uuid(n),
                json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": vcpu}}},
            ).status_code
            == 200
        )
