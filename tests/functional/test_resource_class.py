"""Resource classes over HTTP, per microversion, on every database."""

from __future__ import annotations

from typing import Any

import os_resource_classes
import pytest

from berth.db.engine import Database
from berth.domain import errors, resource_class
from support.provider_rows import allocate, make_provider


def test_list_has_standards_in_order_then_customs(db: Database, client: Any) -> None:
    assert client.post("/resource_classes", json={"name": "CUSTOM_B"}).status_code == 201
    body = client.get("/resource_classes").json()["resource_classes"]
    names = [rc["name"] for rc in body]
    assert names == list(os_resource_classes.STANDARDS) + ["CUSTOM_B"]
    assert body[0]["links"] == [{"rel": "self", "href": "/resource_classes/VCPU"}]


def test_hidden_before_1_2(db: Database, client: Any) -> None:
    assert client.at("1.1").get("/resource_classes").status_code == 404
    assert client.at("1.1").put("/resource_classes/CUSTOM_X").status_code == 404


def test_put_is_idempotent_create_from_1_7(db: Database, client: Any) -> None:
    first = client.put("/resource_classes/CUSTOM_COW")
    assert first.status_code == 201
    assert first.headers["location"].endswith("/resource_classes/CUSTOM_COW")
    again = client.put("/resource_classes/CUSTOM_COW")
    assert again.status_code == 204
    assert "last-modified" not in again.headers
    got = client.get("/resource_classes/CUSTOM_COW")
    assert got.json()["name"] == "CUSTOM_COW"
    assert "last-modified" in got.headers


@pytest.mark.parametrize(
    "name", ["VCPU", "COW", "CUSTOM_lower", "CUSTOM_" + "S" * 249, "CUSTOM_A%0A"]
)
def test_put_rejects_non_custom_names(db: Database, client: Any, name: str) -> None:
    resp = client.put("/resource_classes/" + name)
    assert resp.status_code == 400
    assert "JSON does not validate" in resp.text


def test_rename_before_1_7(db: Database, client: Any) -> None:
    old = client.at("1.6")
    client.post("/resource_classes", json={"name": "CUSTOM_A"})
    client.post("/resource_classes", json={"name": "CUSTOM_B"})
    taken = old.put("/resource_classes/CUSTOM_A", json={"name": "CUSTOM_B"})
    assert taken.status_code == 409
    assert "Resource class already exists: CUSTOM_B" in taken.text
    std = old.put("/resource_classes/VCPU", json={"name": "CUSTOM_C"})
    assert std.status_code == 400
    assert "Cannot update standard resource class VCPU" in std.text
    missing = old.put("/resource_classes/CUSTOM_Z", json={"name": "CUSTOM_C"})
    assert missing.status_code == 404
    done = old.put("/resource_classes/CUSTOM_A", json={"name": "CUSTOM_C"})
    assert done.status_code == 200
    assert done.json() == {
        "name": "CUSTOM_C",
        "links": [{"rel": "self", "href": "/resource_classes/CUSTOM_C"}],
    }
    assert client.get("/resource_classes/CUSTOM_A").status_code == 404
    bodiless = old.put("/resource_classes/CUSTOM_C", headers={"content-type": "application/json"})
    assert bodiless.status_code == 400
    assert "Malformed JSON" in bodiless.text


def test_create_conflict_and_bad_bodies(db: Database, client: Any) -> None:
    assert client.post("/resource_classes", json={"name": "CUSTOM_X"}).status_code == 201
    dup = client.post("/resource_classes", json={"name": "CUSTOM_X"})
    assert dup.status_code == 409
    assert "Conflicting resource class already exists: CUSTOM_X" in dup.text
    for body in ({"name": "VCPU"}, {"name": 5}, {}, {"name": "CUSTOM_Y", "x": 1}):
        assert client.post("/resource_classes", json=body).status_code == 400


def test_delete_rules(db: Database, client: Any) -> None:
    std = client.delete("/resource_classes/VCPU")
    assert std.status_code == 400
    assert "Cannot delete standard resource class VCPU." in std.text
    assert client.delete("/resource_classes/CUSTOM_NONE").status_code == 404
    client.put("/resource_classes/CUSTOM_GOLD")
    rp_id, uuid = make_provider(db)
    client.put(
        "/resource_providers/%s/inventories" % uuid,
        json={"resource_provider_generation": 0, "inventories": {"CUSTOM_GOLD": {"total": 5}}},
    )
    busy = client.delete("/resource_classes/CUSTOM_GOLD")
    assert busy.status_code == 409
    assert "Class is in use in inventory" in busy.text
    client.delete("/resource_providers/%s/inventories" % uuid)
    assert client.delete("/resource_classes/CUSTOM_GOLD").status_code == 204


def test_allocations_alone_block_delete(db: Database) -> None:
    db.run(lambda c: resource_class.create_class(c, "CUSTOM_ORPHAN"))
    rp_id, _ = make_provider(db)
    allocate(db, rp_id, "CUSTOM_ORPHAN", 1)
    with pytest.raises(errors.Conflict):
        db.run(lambda c: resource_class.delete_class(c, "CUSTOM_ORPHAN"))
    assert db.read(lambda c: resource_class.get_class(c, "CUSTOM_ORPHAN")).name == "CUSTOM_ORPHAN"


def test_names_compare_exactly(db: Database) -> None:
    assert db.run(lambda c: resource_class.ensure_class(c, "CUSTOM_CASE"))
    with pytest.raises(errors.NotFound):
        db.read(lambda c: resource_class.get_class(c, "custom_case"))
    assert not db.run(lambda c: resource_class.ensure_class(c, "CUSTOM_CASE"))
