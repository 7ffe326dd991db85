"""Usages per provider, per project/user and per consumer type."""

from __future__ import annotations

import uuid as uuidlib

from berth.db.engine import Database
from support.allocation_setup import PROJECT, USER, body, make_provider
from tests.conftest import Client

OTHER_USER = "f00dfeed-0000-4000-8000-000000000002"


def _fill(client: Client, db: Database) -> str:
    rp = make_provider(db, "cn", VCPU=32, MEMORY_MB=4096, DISK_GB=100)
    claims = [
        ({"VCPU": 2, "MEMORY_MB": 512}, USER, "INSTANCE"),
        ({"VCPU": 4}, USER, "INSTANCE"),
        ({"DISK_GB": 10}, OTHER_USER, "MIGRATION"),
    ]
    for resources, user, ctype in claims:
        resp = client.put(
            "/allocations/%s" % uuidlib.uuid4(), json=body({rp: resources}, user=user, ctype=ctype)
        )
        assert resp.status_code == 204, resp.text
    # One untyped consumer, written before 1.38.
    resp = client.at("1.37").put("/allocations/%s" % uuidlib.uuid4(), json=body({rp: {"VCPU": 1}}))
    assert resp.status_code == 204
    return rp


def test_provider_usages(client: Client, db: Database) -> None:
    rp = _fill(client, db)
    got = client.get("/resource_providers/%s/usages" % rp).json()
    assert got["usages"] == {"VCPU": 7, "MEMORY_MB": 512, "DISK_GB": 10}
    empty = make_provider(db, "empty", VCPU=1)
    assert client.get("/resource_providers/%s/usages" % empty).json()["usages"] == {"VCPU": 0}


def test_provider_usages_without_inventory_or_provider(client: Client) -> None:
    made = client.post("/resource_providers", json={"name": "bare"})
    uuid = made.json()["uuid"]
    got = client.get("/resource_providers/%s/usages" % uuid).json()
    assert got == {"resource_provider_generation": 0, "usages": {}}
    missing = str(uuidlib.uuid4())
    resp = client.get("/resource_providers/%s/usages" % missing)
    assert resp.status_code == 404
    assert "No resource provider with uuid %s found" % missing in resp.json()["errors"][0]["detail"]


def test_project_and_user_usages(client: Client, db: Database) -> None:
    _fill(client, db)
    old = client.at("1.9")
    got = old.get("/usages", params={"project_id": PROJECT}).json()
    assert got == {"usages": {"VCPU": 7, "MEMORY_MB": 512, "DISK_GB": 10}}
    got = old.get("/usages", params={"project_id": PROJECT, "user_id": OTHER_USER}).json()
    assert got == {"usages": {"DISK_GB": 10}}
    got = old.get("/usages", params={"project_id": "nobody"}).json()
    assert got == {"usages": {}}


def test_usages_by_consumer_type(client: Client, db: Database) -> None:
    _fill(client, db)
    got = client.get("/usages", params={"project_id": PROJECT}).json()
    assert got == {
        "usages": {
            "INSTANCE": {"VCPU": 6, "MEMORY_MB": 512, "consumer_count": 2},
            "MIGRATION": {"DISK_GB": 10, "consumer_count": 1},
            "unknown": {"VCPU": 1, "consumer_count": 1},
        }
    }
    q = {"project_id": PROJECT}
    assert client.get("/usages", params={**q, "consumer_type": "all"}).json() == {
        "usages": {"all": {"VCPU": 7, "MEMORY_MB": 512, "DISK_GB": 10, "consumer_count": 4}}
    }
    assert client.get("/usages", params={**q, "consumer_type": "unknown"}).json() == {
        "usages": {"unknown": {"VCPU": 1, "consumer_count": 1}}
    }
    assert client.get(
        "/usages", params={**q, "consumer_type": "MIGRATION", "user_id": OTHER_USER}
    ).json() == {"usages": {"MIGRATION": {"DISK_GB": 10, "consumer_count": 1}}}
    assert client.get("/usages", params={**q, "consumer_type": "ALL"}).json() == {"usages": {}}
    bad = client.get("/usages", params={**q, "consumer_type": "lower"})
    assert bad.status_code == 400
