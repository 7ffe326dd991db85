"""POST /reshaper: atomic moves of inventory and allocations."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

from support.api_setup import (
    PROJECT,
    SERVICE,
    USER,
    allocate,
    make_provider,
    ok,
    set_inventory,
    state,
)

C1, C2, NEW = (str(uuid.uuid4()) for _ in range(3))


def _setup(client: Any) -> tuple[str, str]:
    root = make_provider(client, "cn1")
    child = make_provider(client, "cn1_gpu0", root)
    set_inventory(client, root, {"VCPU": 8, "VGPU": 4})
    ok(allocate(client, C1, {root: {"VCPU": 2, "VGPU": 2}}), 204)
    ok(allocate(client, C2, {root: {"VGPU": 1}}), 204)
    return root, child


def _move_body(client: Any, root: str, child: str, child_vgpu: int = 4) -> dict[str, Any]:
    gens = {u: ok(client.get("/resource_providers/" + u))["generation"] for u in (root, child)}

    def consumer(allocs: dict[str, Any]) -> dict[str, Any]:
        return {
            "allocations": {rp: {"resources": r} for rp, r in allocs.items()},
            "project_id": PROJECT,
            "user_id": USER,
            "consumer_generation": 1,
        }

    return {
        "inventories": {
            root: {
                "resource_provider_generation": gens[root],
                "inventories": {"VCPU": {"total": 8}},
            },
            child: {
                "resource_provider_generation": gens[child],
                "inventories": {"VGPU": {"total": child_vgpu}},
            },
        },
        "allocations": {
            C1: consumer({root: {"VCPU": 2}, child: {"VGPU": 2}}),
            C2: consumer({child: {"VGPU": 1}}),
        },
    }


def _post(client: Any, body: dict[str, Any], version: str = "1.30") -> Any:
    return client.post(
        "/reshaper",
        json=body,
        headers={**SERVICE, "openstack-api-version": "placement %s" % version},
    )


def test_moves_inventory_and_allocations_atomically(client: Any) -> None:
    root, child = _setup(client)
    body = _move_body(client, root, child)
    assert ok(_post(client, body), 204) is None
    inv = ok(client.get("/resource_providers/%s/inventories" % root))
    assert set(inv["inventories"]) == {"VCPU"}
    # interim +1, allocations +1, final +1 (as upstream).
    given = body["inventories"][root]["resource_provider_generation"]
    assert inv["resource_provider_generation"] == given + 3
    assert ok(client.get("/resource_providers/%s/usages" % child)) == {
        "resource_provider_generation": 3,
        "usages": {"VGPU": 3},
    }
    c1 = ok(client.get("/allocations/" + C1))
    assert c1["consumer_generation"] == 2
    assert c1["allocations"][child]["resources"] == {"VGPU": 2}
    assert c1["allocations"][root]["resources"] == {"VCPU": 2}


@pytest.mark.parametrize(
    "spoil, status, code",
    [
        ("stale_provider", 409, "placement.concurrent_update"),
        ("stale_consumer", 409, "placement.concurrent_update"),
        ("too_small", 409, "placement.undefined_code"),
        ("unknown_class", 400, "placement.undefined_code"),
        ("unknown_provider", 400, "placement.resource_provider.not_found"),
        ("stranded", 409, "placement.inventory.inuse"),
    ],
)
def test_rejected_reshape_changes_nothing(client: Any, spoil: str, status: int, code: str) -> None:
    root, child = _setup(client)
    body = _move_body(client, root, child)
    if spoil == "stale_provider":
        body["inventories"][child]["resource_provider_generation"] -= 1
    elif spoil == "stale_consumer":
        body["allocations"][C2]["consumer_generation"] = 7
    elif spoil == "too_small":
        body = _move_body(client, root, child, child_vgpu=2)
    elif spoil == "unknown_class":
        body["inventories"][child]["inventories"] = {"CUSTOM_NOPE": {"total": 4}}
    elif spoil == "unknown_provider":
        body["inventories"][str(uuid.uuid4())] = body["inventories"][child]
    elif spoil == "stranded":
        del body["allocations"][C2]  # C2 keeps VGPU on the root
    before = state(client)
    response = _post(client, body)
    assert response.status_code == status, response.text
    assert response.json()["errors"][0]["code"] == code
    assert state(client) == before


def test_versions_policy_and_consumer_type(client: Any) -> None:
    root, child = _setup(client)
    body = _move_body(client, root, child)
    assert _post(client, body, "1.29").status_code == 404
    # Admin alone is not enough under the secure-RBAC defaults.
    assert client.post("/reshaper", json=body).status_code == 403
    response = _post(client, body, "1.38")
    assert response.status_code == 400
    assert "'consumer_type' is a required property" in response.text
    for consumer in body["allocations"].values():
        consumer["consumer_type"] = "INSTANCE"
    ok(_post(client, body, "1.38"), 204)
    got = client.get("/allocations/" + C1, headers={"openstack-api-version": "placement 1.38"})
    assert ok(got)["consumer_type"] == "INSTANCE"


def _race_once(app_client: Any, make_client: Any) -> None:
    root, child = _setup(app_client)
    body = _move_body(app_client, root, child)
    before = state(app_client)
    results: dict[str, int] = {}
    barrier = threading.Barrier(2)

    def reshape() -> None:
        with make_client() as c:
            barrier.wait()
            results["reshape"] = _post(c, body).status_code

    def claim() -> None:
        with make_client() as c:
            barrier.wait()
            results["claim"] = allocate(c, NEW, {root: {"VGPU": 1}}).status_code

    threads = [threading.Thread(target=reshape), threading.Thread(target=claim)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    after = state(app_client)
    if results["reshape"] == 204:
        # The claim came after the move: no VGPU is left on the root.
        assert results["claim"] == 409
        assert set(after[root]["inventories"]) == {"VCPU"}
        assert sum(a["resources"].get("VGPU", 0) for a in after[child]["allocations"].values()) == 3
    else:
        # The claim came first; the reshape would strand it, so it was
        # refused whole and the claim stands on the old layout.
        assert (results["reshape"], results["claim"]) == (409, 204)
        assert after[child] == before[child]
        assert after[root]["inventories"] == before[root]["inventories"]
        assert NEW in after[root]["allocations"]


def _clients(app: Any) -> Any:
    from tests.conftest import Client

    return lambda: Client(app)


def test_racing_claim_never_sees_half_a_move(client: Any, app: Any, db: Any) -> None:
    from tests.conftest import reset

    for _ in range(3):
        reset(db.engine)
        _race_once(client, _clients(app))


@pytest.mark.stress
def test_racing_claim_many_times(client: Any, app: Any, db: Any) -> None:
    from tests.conftest import reset

    for _ in range(40):
        reset(db.engine)
        _race_once(client, _clients(app))
