"""Set-up through the HTTP API (any ``httpx.Client``: in-process, direct
or live), for the reshaper, agent and client tests: providers,
inventories, allocations, and snapshots to compare before and after."""

from __future__ import annotations

from typing import Any

import httpx

SERVICE = {"x-roles": "admin,service"}
PROJECT, USER = "proj", "user"


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json() if response.content else None


def make_provider(http: httpx.Client, name: str, parent: str | None = None) -> str:
    body: dict[str, Any] = {"name": name}
    if parent:
        body["parent_provider_uuid"] = parent
    return str(
        ok(
            http.post(
                "/resource_providers",
                json=body,
                headers={"openstack-api-version": "placement 1.20"},
            )
        )["uuid"]
    )


def set_inventory(http: httpx.Client, uuid: str, inventories: dict[str, Any]) -> int:
    gen = ok(http.get("/resource_providers/%s" % uuid))["generation"]
    body = {
        "resource_provider_generation": gen,
        "inventories": {
            rc: ({"total": v} if isinstance(v, int) else v) for rc, v in inventories.items()
        },
    }
    return int(
        ok(http.put("/resource_providers/%s/inventories" % uuid, json=body))[
            "resource_provider_generation"
        ]
    )


def allocate(
    http: httpx.Client,
    consumer: str,
    allocations: dict[str, dict[str, int]],
    generation: int | None = None,
) -> httpx.Response:
    return http.put(
        "/allocations/%s" % consumer,
        headers={"openstack-api-version": "placement 1.28"},
        json={
            "allocations": {rp: {"resources": res} for rp, res in allocations.items()},
            "project_id": PROJECT,
            "user_id": USER,
            "consumer_generation": generation,
        },
    )


def state(http: httpx.Client) -> dict[str, Any]:
    """Everything a reshape can change, for before/after comparisons."""
    providers = ok(http.get("/resource_providers"))["resource_providers"]
    result: dict[str, Any] = {}
    for rp in providers:
        uuid = rp["uuid"]
        result[uuid] = {
            "generation": rp["generation"],
            "inventories": ok(http.get("/resource_providers/%s/inventories" % uuid))["inventories"],
            "allocations": ok(http.get("/resource_providers/%s/allocations" % uuid))["allocations"],
        }
    return result


def usage_totals(http: httpx.Client) -> dict[str, int]:
    return dict(ok(http.get("/usages?project_id=" + PROJECT))["usages"])
