"""GET /allocation_candidates over HTTP, on every database, and the
provider filter GET /resource_providers shares with it."""

from __future__ import annotations

from typing import Any

import pytest

from berth.api import microversion
from berth.api.app import create_app
from berth.db.engine import Database
from berth.domain import errors
from berth.domain.allocation_candidate.cache import CandidateCache
from berth.domain.allocation_candidate.provider_filter import filter_provider_ids
from support.numbered_providers import (
    AGG,
    allocate,
    candidates,
    inventory,
    pool_world,
    provider,
    traits,
    uuid,
)
from tests.conftest import Client, make_conf


def test_shared_pool_with_suffixed_group_keeps_both_trees(client: Client) -> None:
    pool_world(client)
    body = candidates(client, "resources=DISK_GB:10&resources1=VCPU:1")
    assert body["allocation_requests"] == [
        {
            "allocations": {
                uuid(1): {"resources": {"VCPU": 1}},
                uuid(3): {"resources": {"DISK_GB": 10}},
            },
            "mappings": {"": [uuid(3)], "1": [uuid(1)]},
        },
        {
            "allocations": {
                uuid(2): {"resources": {"VCPU": 1}},
                uuid(3): {"resources": {"DISK_GB": 10}},
            },
            "mappings": {"": [uuid(3)], "1": [uuid(2)]},
        },
    ]
    assert sorted(body["provider_summaries"]) == [uuid(1), uuid(2), uuid(3)]


def test_same_class_in_two_groups_is_summed_once(client: Client) -> None:
    provider(client, 1)
    inventory(client, uuid(1), VCPU=8)
    for _ in range(3):
        body = candidates(client, "resources=VCPU:1&resources1=VCPU:2")
        assert body["allocation_requests"] == [
            {
                "allocations": {uuid(1): {"resources": {"VCPU": 3}}},
                "mappings": {"": [uuid(1)], "1": [uuid(1)]},
            }
        ]


def test_capacity_counts_usage(client: Client) -> None:
    provider(client, 1)
    inventory(client, uuid(1), VCPU=4)
    allocate(client, uuid(1), VCPU=3)
    assert candidates(client, "resources=VCPU:2")["allocation_requests"] == []
    body = candidates(client, "resources=VCPU:1")
    assert body["provider_summaries"][uuid(1)]["resources"] == {"VCPU": {"capacity": 4, "used": 3}}


def nested_world(client: Client) -> None:
    provider(client, 1)
    inventory(client, uuid(1), VCPU=8, DISK_GB=100)
    traits(client, uuid(1), "HW_CPU_X86_AVX2")
    provider(client, 2, parent=1)
    inventory(client, uuid(2), SRIOV_NET_VF=4)


def test_response_shapes_by_microversion(client: Client) -> None:
    nested_world(client)
    old = client.at("1.10").get("/allocation_candidates?resources=VCPU:1")
    assert old.json() == {
        "allocation_requests": [
            {"allocations": [{"resource_provider": {"uuid": uuid(1)}, "resources": {"VCPU": 1}}]}
        ],
        "provider_summaries": {uuid(1): {"resources": {"VCPU": {"capacity": 8, "used": 0}}}},
    }
    v17 = client.at("1.17").get("/allocation_candidates?resources=VCPU:1")
    assert v17.json()["provider_summaries"] == {
        uuid(1): {"resources": {"VCPU": {"capacity": 8, "used": 0}}, "traits": ["HW_CPU_X86_AVX2"]}
    }
    v29 = client.at("1.29").get("/allocation_candidates?resources=VCPU:1")
    summaries = v29.json()["provider_summaries"]
    assert summaries[uuid(1)]["resources"] == {
        "VCPU": {"capacity": 8, "used": 0},
        "DISK_GB": {"capacity": 100, "used": 0},
    }
    assert summaries[uuid(2)]["parent_provider_uuid"] == uuid(1)
    assert summaries[uuid(2)]["root_provider_uuid"] == uuid(1)
    assert "mappings" not in v29.json()["allocation_requests"][0]


def test_nested_split_needs_1_29(client: Client) -> None:
    nested_world(client)
    query = "/allocation_candidates?resources=VCPU:1,SRIOV_NET_VF:1"
    assert client.at("1.28").get(query).json()["allocation_requests"] == []
    assert len(client.at("1.29").get(query).json()["allocation_requests"]) == 1


def test_limit(client: Client) -> None:
    for n in range(1, 6):
        provider(client, n)
        inventory(client, uuid(n), VCPU=4)
    body = candidates(client, "resources=VCPU:1&limit=2")
    assert [list(r["allocations"]) for r in body["allocation_requests"]] == [[uuid(1)], [uuid(2)]]
    assert sorted(body["provider_summaries"]) == [uuid(1), uuid(2)]


def test_max_candidates_and_randomize(db: Database) -> None:
    conf = make_conf(
        placement__max_allocation_candidates=3, placement__randomize_allocation_candidates=True
    )
    with Client(create_app(conf, db)) as client:
        for n in range(1, 7):
            provider(client, n)
            inventory(client, uuid(n), VCPU=4)
        seen: set[str] = set()
        for query in ["resources=VCPU:1"] * 10 + ["resources=VCPU:1&limit=2"]:
            body = candidates(client, query)
            chosen = [next(iter(r["allocations"])) for r in body["allocation_requests"]]
            assert len(set(chosen)) == len(chosen) == (2 if "limit" in query else 3)
            seen |= set(chosen)
        # The cap applies in the random order (trees drawn per request),
        # not to the first three trees by uuid: more than three come.
        assert len(seen) > 3


@pytest.mark.parametrize(
    "query,status,text",
    [
        ("resources=NO_SUCH:1", 400, "No such resource class NO_SUCH"),
        ("resources=VCPU:1&required=CUSTOM_NOPE", 400, "No such trait(s): CUSTOM_NOPE."),
        ("resources1=VCPU:1&resources2=VCPU:1", 400, '"group_policy" parameter is required'),
        ("resources=VCPU:1&limit=0", 400, "Invalid query string parameters"),
        ("resources=VCPU:1&bogus=1", 400, "does not match any of the regexes"),
    ],
)
def test_errors(client: Client, query: str, status: int, text: str) -> None:
    resp = client.get("/allocation_candidates?" + query)
    assert resp.status_code == status
    assert text in resp.json()["errors"][0]["detail"]


def test_error_codes(client: Client) -> None:
    resp = client.get("/allocation_candidates?resources=VCPU:1&root_required=A&root_required=B")
    assert resp.json()["errors"][0]["code"] == "placement.query.duplicate_key"
    resp = client.get(
        "/allocation_candidates?resources1=VCPU:1&required2=HW_CPU_X86_AVX2&group_policy=none"
    )
    assert resp.json()["errors"][0]["code"] == "placement.query.bad_value"


def test_unknown_in_tree_is_empty(client: Client) -> None:
    nested_world(client)
    body = candidates(client, "resources=VCPU:1&in_tree=%s" % uuid(99))
    assert body == {"allocation_requests": [], "provider_summaries": {}}
    body = candidates(client, "resources=VCPU:1&in_tree=%s" % uuid(2))
    assert len(body["allocation_requests"]) == 1


def test_policy(app: Any) -> None:
    with Client(app, token="user:project") as client:
        resp = client.get("/allocation_candidates?resources=VCPU:1")
    assert resp.status_code == 403


def _ids(db: Database, query: str, version: tuple[int, int] = (1, 39)) -> set[int] | None:
    pairs = [tuple(kv.split("=", 1)) for kv in query.split("&")]
    cache = CandidateCache()
    return db.read(
        lambda conn: filter_provider_ids(conn, cache, pairs, microversion.wants(version))
    )  # type: ignore[arg-type]


def _id_of(db: Database, rp: str) -> int:
    from berth.domain import common

    row = db.read(lambda conn: common.provider_by_uuid(conn, rp))
    assert row is not None
    return int(row.id)


def test_provider_filter(client: Client, db: Database) -> None:
    pool_world(client)
    traits(client, uuid(1), "CUSTOM_GOLD")
    allocate(client, uuid(2), VCPU=8)
    one, two, three = (_id_of(db, uuid(n)) for n in (1, 2, 3))
    assert _ids(db, "name=x") is None
    assert _ids(db, "resources=VCPU:1") == {one}
    assert _ids(db, "required=CUSTOM_GOLD") == {one}
    assert _ids(db, "required=!CUSTOM_GOLD") == {two, three}
    assert _ids(db, "required=in:CUSTOM_GOLD,MISC_SHARES_VIA_AGGREGATE") == {one, three}
    assert _ids(db, "member_of=%s&resources=DISK_GB:5" % AGG) == {three}
    assert _ids(db, "member_of=!%s" % AGG) == set()
    with pytest.raises(errors.BadRequest, match="No such trait"):
        _ids(db, "required=CUSTOM_NOPE")
    with pytest.raises(errors.BadRequest, match="Invalid resource class"):
        _ids(db, "resources=NOPE:1")
    with pytest.raises(errors.BadRequest, match="HW_CPU_X86_VMX,CUSTOM_MAGIC"):
        _ids(db, "required=!CUSTOM_GOLD", (1, 21))


def test_parsed_queries_are_kept_per_query_and_microversion(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    from berth.api.handlers import allocation_candidate as handler
    from berth.api.schemas import allocation_candidate as schema

    app = create_app(make_conf(), db)
    client = Client(app, version="1.39")
    rp = provider(client, 1)
    inventory(client, rp, VCPU=8, MEMORY_MB=4096)
    parses: list[Any] = []
    real = schema.parse_query

    def counted(pairs: Any, version: Any) -> Any:
        parses.append(pairs)
        return real(pairs, version)

    monkeypatch.setattr(schema, "parse_query", counted)
    query = "/allocation_candidates?resources=VCPU:1,MEMORY_MB:512"
    first = client.get(query)
    again = client.get(query)
    assert first.status_code == again.status_code == 200
    assert first.json() == again.json()
    assert len(parses) == 1
    # Another microversion parses (and answers) on its own.
    old = client.at("1.12").get(query)
    assert old.status_code == 200 and "mappings" not in old.text
    assert len(parses) == 2
    assert set(app.state.parsed_queries) == {
        ((1, 39), "resources=VCPU:1,MEMORY_MB:512"),
        ((1, 12), "resources=VCPU:1,MEMORY_MB:512"),
    }
    # A query that does not parse is refused every time, and not kept.
    for _ in range(2):
        assert client.get("/allocation_candidates?resources=VCPU:x").status_code == 400
    assert len(parses) == 4 and len(app.state.parsed_queries) == 2
    # Full: it starts again empty.
    monkeypatch.setattr(handler, "PARSED_LIMIT", 2)
    assert client.get(query + "&limit=1").status_code == 200
    assert list(app.state.parsed_queries) == [((1, 39), "resources=VCPU:1,MEMORY_MB:512&limit=1")]
