"""The order of allocation candidates over HTTP, on every database:
``[berth] candidate_order`` for GET /allocation_candidates (unchanged
Nova) and the per-request form GET /berth/allocation_candidates."""

from __future__ import annotations

from typing import Any

import pytest

from berth.api.app import create_app
from berth.db.engine import Database
from support.numbered_providers import allocate, inventory, provider, traits, uuid
from tests.conftest import Client, make_conf

#: host -> VCPU used of 10 (MEMORY_MB: 1000, used 100 per VCPU)
USED = {1: 6, 2: 2, 3: 9, 4: 0, 5: 4}


def hosts(client: Client) -> None:
    for n, used in USED.items():
        provider(client, n)
        inventory(client, uuid(n), VCPU=10, MEMORY_MB=1000)
        if used:
            allocate(client, uuid(n), VCPU=used, MEMORY_MB=100 * used)


def first(client: Client, query: str, path: str = "/allocation_candidates") -> list[str]:
    resp = client.get(path + "?" + query)
    assert resp.status_code == 200, resp.text
    return [next(iter(r["allocations"])) for r in resp.json()["allocation_requests"]]


def app(db: Database, **opts: Any) -> Client:
    return Client(create_app(make_conf(**opts), db))


def test_default_is_uuid_order(client: Client) -> None:
    hosts(client)
    assert first(client, "resources=VCPU:1&limit=3") == [uuid(1), uuid(2), uuid(3)]


def test_spread_gives_the_emptiest_and_follows_claims(db: Database) -> None:
    with app(db, berth__candidate_order="spread") as client:
        hosts(client)
        assert first(client, "resources=VCPU:1&limit=2") == [uuid(4), uuid(2)]
        # A claim on the emptiest host moves it down (the cache's usage
        # refresh re-ranks it).
        allocate(client, uuid(4), VCPU=8, MEMORY_MB=800)
        assert first(client, "resources=VCPU:1&limit=2") == [uuid(2), uuid(5)]
        assert first(client, "resources=VCPU:1") == [uuid(2), uuid(5), uuid(1), uuid(4), uuid(3)]


def test_pack_gives_the_fullest(db: Database) -> None:
    with app(db, berth__candidate_order="pack") as client:
        hosts(client)
        assert first(client, "resources=VCPU:1&limit=3") == [uuid(3), uuid(1), uuid(5)]


def test_weights_and_a_discouraged_trait(db: Database) -> None:
    with app(
        db,
        berth__candidate_order="spread",
        berth__candidate_order_weights={"MEMORY_MB": 1.0},
        berth__candidate_order_preferences={"COMPUTE_STATUS_DISABLED": -10.0},
    ) as client:
        hosts(client)
        traits(client, uuid(4), "COMPUTE_STATUS_DISABLED")
        assert first(client, "resources=VCPU:1") == [uuid(2), uuid(5), uuid(1), uuid(3), uuid(4)]


def test_disabled_hosts_come_last_unless_configured_otherwise(db: Database) -> None:
    """By default spread and pack send a disabled host (Nova's trait) to
    the back, as Nova's pre-filter would drop it; empty preferences rank
    it by its free capacity like any other."""
    with app(db, berth__candidate_order="spread") as client:
        hosts(client)
        traits(client, uuid(4), "COMPUTE_STATUS_DISABLED")
        traits(client, uuid(3), "COMPUTE_STATUS_DISABLED")
        assert first(client, "resources=VCPU:1") == [uuid(2), uuid(5), uuid(1), uuid(4), uuid(3)]
        assert first(client, "resources=VCPU:1&order=pack", "/berth/allocation_candidates") == [
            uuid(1),
            uuid(5),
            uuid(2),
            uuid(3),
            uuid(4),
        ]
    with app(db, berth__candidate_order="spread", berth__candidate_order_preferences={}) as client:
        assert first(client, "resources=VCPU:1") == [uuid(4), uuid(2), uuid(5), uuid(1), uuid(3)]


def test_randomize_allocation_candidates_is_the_random_order(db: Database) -> None:
    with app(db, placement__randomize_allocation_candidates=True) as client:
        hosts(client)
        seen = {tuple(first(client, "resources=VCPU:1&limit=2")) for _ in range(30)}
        assert len(seen) > 1
        assert all(len(set(s)) == 2 for s in seen)


def test_per_request_order(client: Client) -> None:
    hosts(client)
    path = "/berth/allocation_candidates"
    assert first(client, "resources=VCPU:1&limit=2&order=spread", path) == [uuid(4), uuid(2)]
    assert first(client, "resources=VCPU:1&limit=2&order=pack", path) == [uuid(3), uuid(1)]
    assert first(client, "resources=VCPU:1&order=uuid&limit=2", path) == [uuid(1), uuid(2)]
    traits(client, uuid(2), "CUSTOM_FAST")
    assert first(
        client, "resources=VCPU:1&limit=2&order=pack&weights=VCPU:1&prefer=CUSTOM_FAST:5", path
    ) == [uuid(2), uuid(3)]
    # Without order parameters it is GET /allocation_candidates.
    assert first(client, "resources=VCPU:1", path) == first(client, "resources=VCPU:1")


@pytest.mark.parametrize(
    "query,text",
    [
        ("order=best", "'best' is not one of ['uuid', 'random', 'spread'"),
        ("order=uuid&weights=VCPU:1", "apply only to order spread or pack"),
        ("weights=VCPU:1", "apply only to order spread or pack"),
        ("order=spread&weights=VCPU", "'VCPU' does not match"),
        ("order=spread&weights=VCPU:1,VCPU:2", "weights names VCPU twice"),
        ("order=spread&prefer=X:1e9", "'X:1e9' does not match"),
        ("order=spread&prefer=X:12345678", "'X:12345678' does not match"),
        ("order=spread&order=pack", "order may be given once"),
        ("order=spread&bogus=1", "does not match any of the regexes"),
    ],
)
def test_per_request_errors(client: Client, query: str, text: str) -> None:
    resp = client.get("/berth/allocation_candidates?resources=VCPU:1&" + query)
    assert resp.status_code == 400, resp.text
    assert text in resp.json()["errors"][0]["detail"]


def test_upstream_url_takes_no_order_parameters(client: Client) -> None:
    for name in ("order=spread", "weights=VCPU:1", "prefer=CUSTOM_X:1"):
        resp = client.get("/allocation_candidates?resources=VCPU:1&" + name)
        assert resp.status_code == 400


def test_explain_shows_the_trees_scores(db: Database) -> None:
    """Explain lists the trees a query would get first, with their
    scores, under the configured order or the one asked for, and one
    tree's score with ``explain_tree``."""
    explain = "/berth/explain/allocation_candidates?resources=VCPU:1"
    with app(
        db, berth__candidate_order="spread", berth__candidate_order_weights={"VCPU": 1.0}
    ) as client:
        hosts(client)
        body = client.get(explain).json()
        assert body["order"] == {
            "name": "spread",
            "first": [{"tree": uuid(n), "score": (10 - USED[n]) / 10} for n in (4, 2, 5, 1, 3)],
        }
        body = client.get(explain + "&order=pack&limit=1").json()
        assert [t["tree"] for t in body["order"]["first"]][:2] == [uuid(3), uuid(1)]
        body = client.get(explain + "&explain_tree=" + uuid(1)).json()
        assert body["tree"]["score"] == 0.4
        assert "order" not in client.get(explain + "&order=uuid").json()
        # Weights need a scored order here too.
        resp = client.get(explain + "&order=uuid&weights=VCPU:1")
        assert resp.status_code == 400


def wide_hosts(client: Client) -> None:
    """Upstream's wide-tree reproducer: two computes, each with 8 PFs of
    8 VFs, so every candidate of a host is a permutation of equivalent
    VFs."""
    for host in (1, 2):
        provider(client, 100 * host)
        inventory(client, uuid(100 * host), VCPU=8)
        for pf in range(1, 9):
            provider(client, 100 * host + pf, parent=100 * host)
            inventory(client, uuid(100 * host + pf), SRIOV_NET_VF=8)


def roots(client: Client, query: str) -> list[str]:
    """The root of each candidate's tree, in the answer's order."""
    resp = client.get("/allocation_candidates?" + query)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    root = {u: s["root_provider_uuid"] for u, s in body["provider_summaries"].items()}
    return [root[next(iter(r["allocations"]))] for r in body["allocation_requests"]]


#: Four granular groups of one VF each, at Nova's max_placement_results.
WIDE = "&".join("resources%d=SRIOV_NET_VF:1" % i for i in range(1, 5)) + (
    "&group_policy=none&limit=1000"
)


@pytest.mark.parametrize("order", ["uuid", "random", "spread", "pack"])
def test_a_cut_answer_reaches_every_host(db: Database, order: str) -> None:
    with app(db, berth__candidate_order=order) as client:
        wide_hosts(client)
        found = roots(client, WIDE)
        assert len(found) == 1000
        assert sorted(found[:2]) == [uuid(100), uuid(200)]


def test_tree_by_tree_when_hosts_first_is_off(db: Database) -> None:
    with app(db, berth__candidate_hosts_first=False) as client:
        wide_hosts(client)
        assert set(roots(client, WIDE)) == {uuid(100)}
    # max_allocation_candidates bounds the search: upstream's strategy
    # decides which candidates there are, depth-first by default.
    with app(db, placement__max_allocation_candidates=1000) as client:
        assert set(roots(client, WIDE)) == {uuid(100)}
    with app(
        db,
        placement__max_allocation_candidates=1000,
        placement__allocation_candidates_generation_strategy=("breadth-first"),
    ) as client:
        assert set(roots(client, WIDE)) == {uuid(100), uuid(200)}
