"""Inventories over HTTP and through the domain functions, on every
database."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from berth.db.engine import Database
from berth.domain import errors, inventory, inventory_read
from berth.domain.capacity import Inventory
from support.provider_rows import allocate, generation, make_provider

JSON = {"content-type": "application/json"}


def _url(uuid: str, rc: str = "") -> str:
    return "/resource_providers/%s/inventories%s" % (uuid, "/" + rc if rc else "")


def _put_all(
    client: Any, uuid: str, gen: int, invs: dict[str, Any], version: str | None = None
) -> Any:
    c = client.at(version) if version else client
    return c.put(_url(uuid), json={"resource_provider_generation": gen, "inventories": invs})


def test_post_get_put_delete_cycle(db: Database, client: Any) -> None:
    rp_id, uuid = make_provider(db)
    resp = client.post(
        _url(uuid), json={"resource_class": "VCPU", "total": 8, "allocation_ratio": 2}
    )
    assert resp.status_code == 201
    assert resp.headers["location"].endswith(_url(uuid, "VCPU"))
    assert resp.json() == {
        "total": 8,
        "reserved": 0,
        "min_unit": 1,
        "max_unit": 2147483647,
        "step_size": 1,
        "allocation_ratio": 2,
        "resource_provider_generation": 1,
    }
    got = client.get(_url(uuid, "VCPU")).json()
    assert got["allocation_ratio"] == 2.0 and got["total"] == 8
    resp = client.put(
        _url(uuid, "VCPU"), json={"resource_provider_generation": 1, "total": 16, "reserved": 2}
    )
    assert resp.status_code == 200
    assert resp.json()["resource_provider_generation"] == 2
    listing = client.get(_url(uuid)).json()
    assert listing["resource_provider_generation"] == 2
    assert listing["inventories"]["VCPU"]["reserved"] == 2
    assert listing["inventories"]["VCPU"]["allocation_ratio"] == 1.0
    assert client.delete(_url(uuid, "VCPU")).status_code == 204
    assert generation(db, rp_id) == 3
    assert client.get(_url(uuid)).json()["inventories"] == {}


def test_cache_headers_from_1_15(db: Database, client: Any) -> None:
    _, uuid = make_provider(db)
    assert "last-modified" in client.get(_url(uuid)).headers
    old = client.at("1.14").get(_url(uuid))
    assert "last-modified" not in old.headers
    assert "cache-control" not in old.headers


def test_missing_provider_everywhere(db: Database, client: Any) -> None:
    uuid = "7260669a-e3d4-4867-aaa7-683e2ab6958c"
    for method, url, body in [
        ("GET", _url(uuid), None),
        ("GET", _url(uuid, "VCPU"), None),
        ("POST", _url(uuid), {"resource_class": "VCPU", "total": 1}),
        ("PUT", _url(uuid), {"resource_provider_generation": 0, "inventories": {}}),
        ("PUT", _url(uuid, "VCPU"), {"resource_provider_generation": 0, "total": 1}),
        ("DELETE", _url(uuid), None),
        ("DELETE", _url(uuid, "VCPU"), None),
    ]:
        resp = client.request(method, url, json=body)
        assert resp.status_code == 404, (method, url)
        assert "No resource provider with uuid %s found" % uuid in resp.text


def test_generation_conflicts(db: Database, client: Any) -> None:
    rp_id, uuid = make_provider(db)
    assert _put_all(client, uuid, 0, {"VCPU": {"total": 4}}).status_code == 200
    stale = _put_all(client, uuid, 0, {"VCPU": {"total": 5}})
    assert stale.status_code == 409
    assert stale.json()["errors"][0]["code"] == "placement.concurrent_update"
    stale = client.put(_url(uuid, "VCPU"), json={"resource_provider_generation": 0, "total": 5})
    assert stale.status_code == 409
    assert "resource provider generation conflict" in stale.text
    assert generation(db, rp_id) == 1


def test_reserved_equal_total_allowed_from_1_26(db: Database, client: Any) -> None:
    _, uuid = make_provider(db)
    inv = {"DISK_GB": {"total": 10, "reserved": 10}}
    old = _put_all(client, uuid, 0, inv, "1.25")
    assert old.status_code == 400
    assert "greater than or equal to total" in old.text
    assert _put_all(client, uuid, 0, inv, "1.26").status_code == 200
    over = _put_all(client, uuid, 1, {"DISK_GB": {"total": 10, "reserved": 11}}, "1.26")
    assert over.status_code == 400
    assert "The reserved value is greater than total." in over.text


@pytest.mark.parametrize(
    "body,needle",
    [
        ({"resource_class": "NO_SUCH", "total": 1}, "No such resource class"),
        ({"resource_class": "no_such", "total": 1}, "JSON does not validate"),
        ({"resource_class": "VCPU", "total": 2**31}, "Failed validating"),
        ({"resource_class": "VCPU", "total": 2**70}, "Bad Request"),
        ({"resource_class": "VCPU", "total": 1, "x": 1}, "Additional properties"),
        ({"resource_class": "VCPU", "total": 1.5}, "is not of type 'integer'"),
        (
            {"resource_class": "VCPU", "total": 4, "allocation_ratio": -1},
            "Unable to create inventory",
        ),
    ],
)
def test_post_rejects_bad_input(
    db: Database, client: Any, body: dict[str, Any], needle: str
) -> None:
    _, uuid = make_provider(db)
    resp = client.post(_url(uuid), json=body)
    assert resp.status_code == 400
    assert needle in resp.text


def test_post_existing_class_conflicts(db: Database, client: Any) -> None:
    _, uuid = make_provider(db)
    body = {"resource_class": "VCPU", "total": 1}
    assert client.post(_url(uuid), json=body).status_code == 201
    again = client.post(_url(uuid), json=body)
    assert again.status_code == 409
    assert "Update conflict" in again.text


def test_put_all_hostile_class_names(db: Database, client: Any) -> None:
    _, uuid = make_provider(db)
    for name in ("HOUSE", "vcpu", "VCPU\n", "VCPU'; DROP TABLE x"):
        resp = _put_all(client, uuid, 0, {name: {"total": 1}})
        assert resp.status_code == 400, name
        assert "Unknown resource class in inventory" in resp.text


def test_put_one_unknown_or_absent_class(db: Database, client: Any) -> None:
    _, uuid = make_provider(db)
    body = {"resource_provider_generation": 0, "total": 1}
    absent = client.put(_url(uuid, "VCPU"), json=body)
    assert absent.status_code == 400
    assert "No inventory record with resource class" in absent.text
    unknown = client.put(_url(uuid, "HOUSE"), json=body)
    assert unknown.status_code == 400
    long_name = client.put(_url(uuid, "X" * 300), json=body)
    assert long_name.status_code == 400


def test_delete_single_in_use(db: Database, client: Any) -> None:
    rp_id, uuid = make_provider(db)
    _put_all(client, uuid, 0, {"VCPU": {"total": 4}, "DISK_GB": {"total": 9}})
    allocate(db, rp_id, "VCPU", 2)
    resp = client.delete(_url(uuid, "VCPU"))
    assert resp.status_code == 409
    assert (
        "Unable to delete inventory of class VCPU: Inventory for 'VCPU' "
        "on resource provider '%s' in use." % uuid
    ) in resp.text
    # Upstream reports this case with the concurrent-update code.
    assert resp.json()["errors"][0]["code"] == "placement.concurrent_update"
    assert generation(db, rp_id) == 1
    missing = client.delete(_url(uuid, "IPV4_ADDRESS"))
    assert missing.status_code == 404
    assert "No inventory of class IPV4_ADDRESS found for delete" in missing.text


def test_delete_all_and_replace_in_use(db: Database, client: Any) -> None:
    rp_id, uuid = make_provider(db)
    _put_all(
        client, uuid, 0, {"VCPU": {"total": 4}, "DISK_GB": {"total": 9}, "MEMORY_MB": {"total": 64}}
    )
    allocate(db, rp_id, "VCPU", 1)
    allocate(db, rp_id, "DISK_GB", 1)
    resp = client.delete(_url(uuid))
    assert resp.status_code == 409
    assert resp.json()["errors"][0]["code"] == "placement.inventory.inuse"
    assert (
        resp.json()["errors"][0]["detail"]
        .strip()
        .endswith("Inventory for 'VCPU, DISK_GB' on resource provider '%s' in use." % uuid)
    )
    resp = _put_all(client, uuid, 1, {"MEMORY_MB": {"total": 64}})
    assert resp.status_code == 409
    assert "update conflict: Inventory for 'VCPU, DISK_GB'" in resp.text
    assert resp.json()["errors"][0]["code"] == "placement.inventory.inuse"
    # Nothing changed: the failed requests were rolled back.
    listing = client.get(_url(uuid)).json()
    assert listing["resource_provider_generation"] == 1
    assert sorted(listing["inventories"]) == ["DISK_GB", "MEMORY_MB", "VCPU"]
    assert client.at("1.4").delete(_url(uuid)).status_code == 405


def test_shrinking_below_usage_is_allowed(db: Database, client: Any, caplog: Any) -> None:
    # Upstream lets an inventory shrink under existing allocations (the
    # provider is then over capacity, and a warning says so); only
    # removal is refused.
    rp_id, uuid = make_provider(db)
    _put_all(client, uuid, 0, {"VCPU": {"total": 8}, "DISK_GB": {"total": 9}})
    allocate(db, rp_id, "VCPU", 6)
    with caplog.at_level(logging.WARNING, logger="berth.domain.inventory"):
        resp = client.put(_url(uuid, "VCPU"), json={"resource_provider_generation": 1, "total": 5})
        assert resp.status_code == 200
        assert "over capacity for VCPU" in caplog.text
        caplog.clear()
        resp = _put_all(client, uuid, 2, {"VCPU": {"total": 4}, "DISK_GB": {"total": 1}})
        assert resp.status_code == 200
        assert "over capacity for VCPU:" in caplog.text  # not DISK_GB


def test_domain_set_and_check_in_use(db: Database) -> None:
    rp_id, uuid = make_provider(db)
    invs = {"VCPU": Inventory(total=4), "DISK_GB": Inventory(total=100, reserved=5)}
    db.run(lambda c: inventory.set_inventories(c, rp_id, invs))
    assert db.read(lambda c: inventory_read.list_inventories(c, uuid)).inventories == invs
    allocate(db, rp_id, "DISK_GB", 10)
    with pytest.raises(errors.InventoryInUse):
        db.run(lambda c: inventory.set_inventories(c, rp_id, {}))

    # Skipping the check lets a reshaper pass through an intermediate
    # state; the end-state check then catches what is still stranded.
    def reshape(conn: Any) -> None:
        inventory.set_inventories(conn, rp_id, {}, check_in_use=False)
        inventory.check_in_use(conn, rp_id)

    with pytest.raises(errors.InventoryInUse):
        db.run(reshape)
    assert db.read(lambda c: inventory_read.list_inventories(c, uuid)).inventories == invs
    with pytest.raises(errors.NotFound):
        db.run(lambda c: inventory.set_inventories(c, rp_id, {"NOPE": Inventory(total=1)}))


def test_content_type_and_accept(db: Database, client: Any) -> None:
    _, uuid = make_provider(db)
    resp = client.post(_url(uuid), content=b"{}", headers={"content-type": "text/plain"})
    assert resp.status_code == 415
    resp = client.get(_url(uuid), headers={"accept": "text/plain"})
    assert resp.status_code == 406


def test_non_admin_forbidden(db: Database, app: Any) -> None:
    from tests.conftest import Client

    _, uuid = make_provider(db)
    with Client(app, token="user") as user:
        assert user.get(_url(uuid)).status_code == 403
        assert user.delete(_url(uuid, "VCPU")).status_code == 403


MISSING = "00000000-0000-0000-0000-0000000000ee"


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("PUT", _url(MISSING), {"inventories": {}}),
        (
            "PUT",
            _url(MISSING),
            {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": -1}}},
        ),
        (
            "PUT",
            _url(MISSING),
            {
                "resource_provider_generation": 0,
                "inventories": {"VCPU": {"total": 1, "reserved": 2}},
            },
        ),
        ("PUT", _url(MISSING, "VCPU"), {"total": 1}),
        ("POST", _url(MISSING), {"resource_class": "VCPU", "total": 10**19}),
        ("PUT", "/resource_providers/%s/aggregates" % MISSING, {"x": 1}),
        ("PUT", "/resource_providers/%s" % MISSING, {"nom": "x"}),
    ],
)
def test_missing_provider_is_404_before_a_bad_body(
    client: Any, method: str, path: str, body: Any
) -> None:
    """A write to a missing provider is a 404 whatever its body says
    (upstream checks the provider first), and so is one whose body is
    fine (the write itself finds the provider missing)."""
    resp = client.request(method, path, json=body)
    assert resp.status_code == 404, resp.text
    assert resp.json()["errors"][0]["status"] == 404
    fine = {
        "PUT": {"resource_provider_generation": 0, "inventories": {}},
        "POST": {"resource_class": "VCPU", "total": 1},
    }[method]
    if path.endswith("VCPU"):
        fine = {"resource_provider_generation": 0, "total": 1}
    elif "aggregates" in path:
        fine = {"resource_provider_generation": 0, "aggregates": []}
    elif path.endswith(MISSING):
        fine = {"name": "x"}
    assert client.request(method, path, json=fine).status_code == 404
