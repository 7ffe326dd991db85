"""Provider aggregates over HTTP, on every database backend."""

from __future__ import annotations

import uuid as uuidlib
from typing import Any

import pytest
import sqlalchemy as sa

from berth.db import tables as t

AGG1 = "f918801a-5e54-4bee-9095-09a9d0c786b8"
AGG2 = "a893eb5c-e2a0-4251-ab26-f71d3b0cfc0b"


def _put(client: Any, url: str, aggs: list[str], gen: int) -> Any:
    return client.put(url, json={"aggregates": aggs, "resource_provider_generation": gen})


def test_set_and_get_with_generation(client: Any, rp: str) -> None:
    assert client.get(rp).json() == {"aggregates": [], "resource_provider_generation": 0}
    resp = _put(client, rp, [AGG1, AGG2], 0)
    assert resp.status_code == 200
    assert resp.json() == {"aggregates": [AGG1, AGG2], "resource_provider_generation": 1}
    assert resp.headers["cache-control"] == "no-cache"
    got = client.get(rp).json()
    assert sorted(got["aggregates"]) == sorted([AGG1, AGG2])
    assert got["resource_provider_generation"] == 1
    # Every PUT from 1.19 bumps the generation, as upstream's does.
    assert _put(client, rp, [AGG1, AGG2], 1).json()["resource_provider_generation"] == 2


def test_stale_generation_conflicts(client: Any, rp: str) -> None:
    assert _put(client, rp, [AGG1], 0).status_code == 200
    resp = _put(client, rp, [], 0)
    assert resp.status_code == 409
    assert resp.json()["errors"][0]["code"] == "placement.concurrent_update"
    assert client.get(rp).json()["aggregates"] == [AGG1]
    # A generation beyond any integer column is a plain conflict too.
    assert _put(client, rp, [], 2**40).status_code == 409


def test_before_1_19_list_body_and_no_generation(client: Any, rp: str) -> None:
    old = client.at("1.18")
    resp = old.put(rp, json=[AGG1])
    assert resp.status_code == 200
    assert resp.json() == {"aggregates": [AGG1]}
    assert "cache-control" in resp.headers
    assert client.get(rp).json()["resource_provider_generation"] == 0
    assert "cache-control" not in client.at("1.14").get(rp).headers
    assert (
        old.put(rp, json={"aggregates": [], "resource_provider_generation": 0}).status_code == 400
    )
    assert client.put(rp, json=[AGG1]).status_code == 400


def test_not_before_1_1(client: Any, rp: str) -> None:
    assert client.at("1.0").get(rp).status_code == 404
    assert client.at("1.0").put(rp, json=[]).status_code == 404


@pytest.mark.parametrize(
    "aggs,words",
    [
        ([AGG1, AGG1], "has non-unique elements"),
        (["harry"], "is not a 'uuid'"),
        ([12], "JSON does not validate"),
        (["%s\u0000" % AGG1], "NUL"),
    ],
)
def test_bad_bodies(client: Any, rp: str, aggs: list[Any], words: str) -> None:
    resp = _put(client, rp, aggs, 0)
    assert resp.status_code == 400
    assert words in resp.json()["errors"][0]["detail"]
    assert client.get(rp).json()["resource_provider_generation"] == 0


def test_unknown_provider(client: Any) -> None:
    url = "/resource_providers/%s/aggregates" % uuidlib.uuid4()
    assert client.get(url).status_code == 404
    assert _put(client, url, [], 0).status_code == 404


def test_long_uuid_spellings_are_stored_dashed(client: Any, rp: str) -> None:
    resp = _put(client, rp, ["urn:uuid:" + AGG1, "{%s}" % AGG2.upper(), AGG1.replace("-", "")], 0)
    assert resp.status_code == 200
    assert resp.json()["aggregates"] == [AGG1, AGG2, AGG1.replace("-", "")]


def test_spellings_of_one_uuid_collapse(client: Any, rp: str) -> None:
    resp = _put(client, rp, [AGG1, "urn:uuid:" + AGG1], 0)
    assert resp.status_code == 200
    assert resp.json()["aggregates"] == [AGG1]


def test_aggregate_rows_are_shared(client: Any, db: Any, rp: str) -> None:
    other = client.post("/resource_providers", json={"name": "b"}).json()
    url = "/resource_providers/%s/aggregates" % other["uuid"]
    assert _put(client, rp, [AGG1], 0).status_code == 200
    assert _put(client, url, [AGG1, AGG2], 0).status_code == 200
    assert _put(client, rp, [], 1).status_code == 200
    count = db.read(
        lambda c: c.scalar(sa.select(sa.func.count()).select_from(t.placement_aggregates))
    )
    assert count == 2
    assert sorted(client.get(url).json()["aggregates"]) == sorted([AGG1, AGG2])


def test_policy(app: Any, rp: str) -> None:
    from tests.conftest import Client

    with Client(app, token="user") as user:
        assert user.get(rp).status_code == 403
        assert _put(user, rp, [], 0).status_code == 403
