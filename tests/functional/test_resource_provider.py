"""Resource providers over HTTP, on every database backend."""

from __future__ import annotations

import uuid as uuidlib
from typing import Any

import pytest
import sqlalchemy as sa

from berth.db import tables as t

ROOT = "/resource_providers"


def _create(
    client: Any, name: str, parent: str | None = None, uuid: str | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {"name": name}
    if parent:
        body["parent_provider_uuid"] = parent
    if uuid:
        body["uuid"] = uuid
    resp = client.post(ROOT, json=body)
    assert resp.status_code == 200, resp.text
    return resp.json()  # type: ignore[no-any-return]


def _detail(resp: Any) -> str:
    return resp.json()["errors"][0]["detail"]  # type: ignore[no-any-return]


def _code(resp: Any) -> str:
    return resp.json()["errors"][0]["code"]  # type: ignore[no-any-return]


def test_create_before_1_20_is_201_without_body(client: Any) -> None:
    resp = client.at("1.19").post(ROOT, json={"name": "old"})
    assert resp.status_code == 201
    assert resp.content == b""
    rp_uuid = resp.headers["location"].rsplit("/", 1)[1]
    assert resp.headers["location"].endswith("/resource_providers/" + rp_uuid)
    assert client.get("%s/%s" % (ROOT, rp_uuid)).json()["name"] == "old"


def test_create_from_1_20_returns_provider(client: Any) -> None:
    resp = client.post(ROOT, json={"name": "new"})
    assert resp.status_code == 200
    body = resp.json()
    assert resp.headers["location"].endswith("/resource_providers/" + body["uuid"])
    assert body["generation"] == 0
    assert body["parent_provider_uuid"] is None
    assert body["root_provider_uuid"] == body["uuid"]
    assert resp.headers["cache-control"] == "no-cache"
    assert "last-modified" in resp.headers


@pytest.mark.parametrize(
    "version,rels",
    [
        ("1.0", ["self", "inventories", "usages"]),
        ("1.1", ["self", "inventories", "usages", "aggregates"]),
        ("1.6", ["self", "inventories", "usages", "aggregates", "traits"]),
        ("1.11", ["self", "inventories", "usages", "aggregates", "traits", "allocations"]),
    ],
)
def test_links_per_version(client: Any, version: str, rels: list[str]) -> None:
    rp = _create(client, "linked")
    got = client.at(version).get("%s/%s" % (ROOT, rp["uuid"])).json()
    assert [link["rel"] for link in got["links"]] == rels
    assert got["links"][0]["href"] == "/resource_providers/" + rp["uuid"]
    listed = client.at(version).get(ROOT).json()["resource_providers"]
    assert listed[0]["links"] == got["links"]


def test_nested_fields_only_from_1_14(client: Any) -> None:
    rp = _create(client, "plain")
    old = client.at("1.13").get("%s/%s" % (ROOT, rp["uuid"])).json()
    assert set(old) == {"uuid", "name", "generation", "links"}


def test_cache_headers_only_from_1_15(client: Any) -> None:
    _create(client, "cached")
    assert "cache-control" not in client.at("1.14").get(ROOT).headers
    assert client.at("1.15").get(ROOT).headers["cache-control"] == "no-cache"


def test_dashless_uuid_is_normalized_and_conflicts(client: Any) -> None:
    dashed = "2290d4af-9e6e-400b-9d65-1ee01376f71a"
    rp = _create(client, "dashless", uuid=dashed.replace("-", "").upper())
    assert rp["uuid"] == dashed
    resp = client.post(ROOT, json={"name": "other", "uuid": dashed})
    assert resp.status_code == 409
    assert ("Conflicting resource provider uuid: %s already exists" % dashed) in _detail(resp)
    assert _code(resp) == "placement.duplicate_name"


def test_duplicate_name_conflicts(client: Any) -> None:
    _create(client, "twin")
    resp = client.post(ROOT, json={"name": "twin"})
    assert resp.status_code == 409
    assert "Conflicting resource provider name: twin already exists" in _detail(resp)
    assert _code(resp) == "placement.duplicate_name"


def test_name_and_uuid_both_taken_names_both(client: Any) -> None:
    first = _create(client, "one")
    _create(client, "two")
    resp = client.post(ROOT, json={"name": "two", "uuid": first["uuid"]})
    assert resp.status_code == 409
    assert (
        "Conflicting resource provider name: two, uuid: %s already exists" % first["uuid"]
    ) in _detail(resp)
    resp = client.post(ROOT, json={"name": "one", "uuid": first["uuid"]})
    assert (
        "Conflicting resource provider name: one, uuid: %s already exists" % first["uuid"]
    ) in _detail(resp)
    assert len(client.get(ROOT).json()["resource_providers"]) == 2


def test_rename_conflict_undoes_the_move_it_came_with(client: Any) -> None:
    parent = _create(client, "parent")
    _create(client, "taken")
    mover = _create(client, "mover")
    resp = client.at("1.37").put(
        "%s/%s" % (ROOT, mover["uuid"]),
        json={"name": "taken", "parent_provider_uuid": parent["uuid"]},
    )
    assert resp.status_code == 409
    assert _code(resp) == "placement.duplicate_name"
    after = client.get("%s/%s" % (ROOT, mover["uuid"])).json()
    assert (
        after["name"],
        after["parent_provider_uuid"],
        after["root_provider_uuid"],
        after["generation"],
    ) == ("mover", None, mover["uuid"], 0)


def test_names_are_case_sensitive_everywhere(client: Any) -> None:
    _create(client, "Mixed")
    _create(client, "mixed")
    found = client.get(ROOT, params={"name": "mixed"}).json()
    assert [p["name"] for p in found["resource_providers"]] == ["mixed"]


def test_rename_to_taken_name_conflicts(client: Any) -> None:
    _create(client, "first")
    second = _create(client, "second")
    resp = client.put("%s/%s" % (ROOT, second["uuid"]), json={"name": "first"})
    assert resp.status_code == 409
    assert _code(resp) == "placement.duplicate_name"
    # Renaming to its own name is no conflict and leaves the generation.
    resp = client.put("%s/%s" % (ROOT, second["uuid"]), json={"name": "second"})
    assert resp.status_code == 200
    assert resp.json()["generation"] == 0


@pytest.mark.parametrize(
    "body,words",
    [
        ({"name": "x" * 201}, "Failed validating 'maxLength'"),
        ({"name": "nul\u0000name"}, "NUL"),
        ({"name": "ok", "uuid": "not-a-uuid"}, "Failed validating 'format'"),
        ({"name": "ok", "uuid": "urn:uuid:zz"}, "Failed validating 'format'"),
        ({"name": 12}, "JSON does not validate"),
        ({"uuid": str(uuidlib.uuid4())}, "JSON does not validate"),
        ({"name": "ok", "parent_provider_uuid": "nope"}, "JSON does not validate"),
        (
            {"name": "ok", "root_provider_uuid": str(uuidlib.uuid4())},
            "Additional properties are not allowed",
        ),
    ],
)
def test_hostile_create_bodies(client: Any, body: dict[str, Any], words: str) -> None:
    resp = client.post(ROOT, json=body)
    assert resp.status_code == 400, resp.text
    assert words in _detail(resp)
    assert client.get(ROOT).json()["resource_providers"] == []


def test_name_of_200_characters_is_fine(client: Any) -> None:
    rp = _create(client, "\u2603" * 200)
    assert rp["name"] == "\u2603" * 200


@pytest.mark.parametrize(
    "query",
    [
        "uuid=spameggs",
        "spam=eggs",
        "in_tree=12",
        "name=a&bogus=1",
    ],
)
def test_hostile_queries(client: Any, query: str) -> None:
    resp = client.get(ROOT + "?" + query)
    assert resp.status_code == 400
    assert "Invalid query string parameters" in _detail(resp)


def test_query_parameters_per_version(client: Any) -> None:
    tree = str(uuidlib.uuid4())
    assert client.at("1.13").get(ROOT, params={"in_tree": tree}).status_code == 400
    assert client.at("1.14").get(ROOT, params={"in_tree": tree}).json()["resource_providers"] == []


def test_overlong_values_just_match_nothing(client: Any) -> None:
    _create(client, "short")
    found = client.get(ROOT, params={"name": "n" * 500}).json()
    assert found["resource_providers"] == []
    resp = client.get("%s/%s" % (ROOT, "u" * 300))
    assert resp.status_code == 404


def test_unknown_provider_404s(client: Any) -> None:
    missing = str(uuidlib.uuid4())
    resp = client.get("%s/%s" % (ROOT, missing))
    assert resp.status_code == 404
    assert "No resource provider with uuid %s found" % missing in _detail(resp)
    resp = client.delete("%s/%s" % (ROOT, missing))
    assert "found for delete" in _detail(resp)
    resp = client.put("%s/%s" % (ROOT, missing), json={"bad": 1})
    assert resp.status_code == 404


def test_put_validation(client: Any) -> None:
    rp = _create(client, "valid")
    url = "%s/%s" % (ROOT, rp["uuid"])
    for body in ({"badfield": 1}, {"name": "x", "uuid": rp["uuid"]}, {"name": "y" * 201}):
        assert client.put(url, json=body).status_code == 400
    resp = client.at("1.13").put(
        url, json={"name": "x", "parent_provider_uuid": str(uuidlib.uuid4())}
    )
    assert resp.status_code == 400


def test_non_admin_is_forbidden(app: Any) -> None:
    from tests.conftest import Client

    with Client(app, token="user") as user:
        assert user.get(ROOT).status_code == 403
        assert user.post(ROOT, json={"name": "x"}).status_code == 403


def test_list_filters_by_name_uuid_and_tree(client: Any) -> None:
    root = _create(client, "root")
    child = _create(client, "child", parent=root["uuid"])
    other = _create(client, "other")
    by_tree = client.get(ROOT, params={"in_tree": child["uuid"]}).json()
    assert sorted(p["uuid"] for p in by_tree["resource_providers"]) == sorted(
        [root["uuid"], child["uuid"]]
    )
    by_uuid = client.get(ROOT, params={"uuid": other["uuid"]}).json()
    assert [p["name"] for p in by_uuid["resource_providers"]] == ["other"]
    both = client.get(ROOT, params={"in_tree": root["uuid"], "name": "child"}).json()
    assert [p["uuid"] for p in both["resource_providers"]] == [child["uuid"]]


def test_delete_removes_inventory_traits_and_aggregates(client: Any, db: Any) -> None:
    rp = _create(client, "doomed")
    keep = _create(client, "kept")
    agg = str(uuidlib.uuid4())
    for target in (rp, keep):
        assert (
            client.put(
                "%s/%s/aggregates" % (ROOT, target["uuid"]),
                json={
                    "aggregates": [agg],
                    "resource_provider_generation": 0,
                },
            ).status_code
            == 200
        )

    def add_rows(conn: Any) -> None:
        rp_id = conn.scalar(
            sa.select(t.resource_providers.c.id).where(t.resource_providers.c.uuid == rp["uuid"])
        )
        vcpu = conn.scalar(
            sa.select(t.resource_classes.c.id).where(t.resource_classes.c.name == "VCPU")
        )
        trait = conn.scalar(sa.select(t.traits.c.id).where(t.traits.c.name == "HW_CPU_X86_AVX"))
        conn.execute(
            t.inventories.insert().values(
                resource_provider_id=rp_id,
                resource_class_id=vcpu,
                total=4,
                reserved=0,
                min_unit=1,
                max_unit=4,
                step_size=1,
                allocation_ratio=1.0,
            )
        )
        conn.execute(
            t.resource_provider_traits.insert().values(resource_provider_id=rp_id, trait_id=trait)
        )

    db.run(add_rows)
    assert client.delete("%s/%s" % (ROOT, rp["uuid"])).status_code == 204

    def counts(conn: Any) -> list[int]:
        return [
            conn.scalar(sa.select(sa.func.count()).select_from(table))
            for table in (t.inventories, t.resource_provider_traits, t.resource_provider_aggregates)
        ]

    assert db.read(counts) == [0, 0, 1]
    assert client.get("%s/%s/aggregates" % (ROOT, keep["uuid"])).json()["aggregates"] == [agg]


def test_delete_with_allocations_is_in_use(client: Any, db: Any) -> None:
    rp = _create(client, "busy")

    def allocate(conn: Any) -> None:
        rp_id = conn.scalar(
            sa.select(t.resource_providers.c.id).where(t.resource_providers.c.uuid == rp["uuid"])
        )
        vcpu = conn.scalar(
            sa.select(t.resource_classes.c.id).where(t.resource_classes.c.name == "VCPU")
        )
        conn.execute(
            t.allocations.insert().values(
                resource_provider_id=rp_id,
                resource_class_id=vcpu,
                used=1,
                consumer_id=str(uuidlib.uuid4()),
            )
        )

    db.run(allocate)
    resp = client.delete("%s/%s" % (ROOT, rp["uuid"]))
    assert resp.status_code == 409
    assert _code(resp) == "placement.resource_provider.inuse"
    assert (
        "Unable to delete resource provider %s: Resource provider has allocations." % rp["uuid"]
    ) in _detail(resp)
    assert client.get("%s/%s" % (ROOT, rp["uuid"])).status_code == 200
