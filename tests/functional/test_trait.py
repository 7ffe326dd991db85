"""Traits and provider traits over HTTP, on every database."""

from __future__ import annotations

from typing import Any

import pytest

from berth.db.engine import Database
from berth.domain import trait
from support.provider_rows import generation, make_provider


def _rp_traits(uuid: str) -> str:
    return "/resource_providers/%s/traits" % uuid


def test_put_get_delete_trait(db: Database, client: Any) -> None:
    first = client.put("/traits/CUSTOM_T1")
    assert first.status_code == 201
    assert first.headers["location"].endswith("/traits/CUSTOM_T1")
    assert client.put("/traits/CUSTOM_T1").status_code == 204
    got = client.get("/traits/CUSTOM_T1")
    assert got.status_code == 204 and "last-modified" in got.headers
    assert "last-modified" not in client.at("1.14").get("/traits/CUSTOM_T1").headers
    assert client.delete("/traits/CUSTOM_T1").status_code == 204
    gone = client.get("/traits/CUSTOM_T1")
    assert gone.status_code == 404
    assert "No such trait(s): CUSTOM_T1." in gone.text
    assert client.at("1.5").get("/traits").status_code == 404


@pytest.mark.parametrize(
    "name", ["TRAIT_X", "CUSTOM_A:1", "CUSTOM_a", "CUSTOM_" + "A" * 249, "CUSTOM_X%0A"]
)
def test_put_invalid_trait(db: Database, client: Any, name: str) -> None:
    resp = client.put("/traits/" + name)
    assert resp.status_code == 400
    assert "The trait is invalid." in resp.text


def test_standard_trait_cannot_be_deleted(db: Database, client: Any) -> None:
    resp = client.delete("/traits/HW_CPU_X86_SSE")
    assert resp.status_code == 400
    assert "Cannot delete standard trait HW_CPU_X86_SSE." in resp.text


def test_list_filters(db: Database, client: Any) -> None:
    for name in ("CUSTOM_TRAIT_1", "CUSTOM_TRAIT_2", "CUSTOM_TRAITX", "CUSTOM_OTHER"):
        client.put("/traits/" + name)
    got = client.get("/traits", params={"name": "startswith:CUSTOM_TRAIT_"})
    assert got.json() == {"traits": ["CUSTOM_TRAIT_1", "CUSTOM_TRAIT_2"]}
    got = client.get("/traits", params={"name": "in:CUSTOM_OTHER,custom_other,HW_CPU_X86_SSE"})
    assert got.json() == {"traits": ["CUSTOM_OTHER", "HW_CPU_X86_SSE"]}
    everything = client.get("/traits", params={"name": "foo:bar"}).json()
    assert "HW_CPU_X86_SSE" in everything["traits"]
    assert everything["traits"] == sorted(everything["traits"])
    bad = client.get("/traits", params={"name": "in_abc"})
    assert bad.status_code == 400 and "Badly formatted name" in bad.text
    bad = client.get("/traits", params={"associated": "maybe"})
    assert bad.status_code == 400
    bad = client.get("/traits", params={"colour": "red"})
    assert bad.status_code == 400
    assert "Additional properties are not allowed" in bad.text


def test_provider_traits_cycle(db: Database, client: Any) -> None:
    rp_id, uuid = make_provider(db)
    client.put("/traits/CUSTOM_B")
    client.put("/traits/CUSTOM_A")
    empty = client.get(_rp_traits(uuid)).json()
    assert empty == {"traits": [], "resource_provider_generation": 0}
    resp = client.put(
        _rp_traits(uuid),
        json={"traits": ["CUSTOM_B", "CUSTOM_A", "CUSTOM_B"], "resource_provider_generation": 0},
    )
    assert resp.status_code == 200
    assert resp.json() == {"traits": ["CUSTOM_A", "CUSTOM_B"], "resource_provider_generation": 1}
    assoc = client.get("/traits", params={"associated": "true"}).json()
    assert assoc == {"traits": ["CUSTOM_A", "CUSTOM_B"]}
    unassoc = client.get("/traits", params={"associated": "False"}).json()
    assert "CUSTOM_A" not in unassoc["traits"]
    busy = client.delete("/traits/CUSTOM_A")
    assert busy.status_code == 409
    assert "The trait CUSTOM_A is in use by a resource provider." in busy.text
    stale = client.put(_rp_traits(uuid), json={"traits": [], "resource_provider_generation": 0})
    assert stale.status_code == 409
    assert stale.json()["errors"][0]["code"] == "placement.concurrent_update"
    unknown = client.put(
        _rp_traits(uuid),
        json={"traits": ["CUSTOM_A", "NOPE_2", "NOPE_1"], "resource_provider_generation": 1},
    )
    assert unknown.status_code == 400
    assert "No such trait NOPE_1, NOPE_2" in unknown.text
    assert client.delete(_rp_traits(uuid)).status_code == 204
    assert generation(db, rp_id) == 2
    assert client.get(_rp_traits(uuid)).json()["traits"] == []


def test_missing_provider(db: Database, client: Any) -> None:
    body = {"traits": [], "resource_provider_generation": 0}
    for method, kw in (("GET", {}), ("PUT", {"json": body}), ("DELETE", {})):
        resp = client.request(method, _rp_traits("non_existed"), **kw)
        assert resp.status_code == 404
        assert "No resource provider with uuid non_existed found" in resp.text


def test_bad_provider_trait_bodies(db: Database, client: Any) -> None:
    _, uuid = make_provider(db)
    for body in (
        {"traits": ["X"]},
        {"traits": "x", "resource_provider_generation": 0},
        {"traits": [""], "resource_provider_generation": 0},
        {"traits": ["A" * 256], "resource_provider_generation": 0},
        {"traits": [], "resource_provider_generation": "0"},
    ):
        assert client.put(_rp_traits(uuid), json=body).status_code == 400


def test_domain_ensure_is_idempotent(db: Database) -> None:
    created, first = db.run(lambda c: trait.ensure_trait(c, "CUSTOM_Q"))
    again, second = db.run(lambda c: trait.ensure_trait(c, "CUSTOM_Q"))
    assert created and not again and first.name == second.name
