"""The planner skips trees that cannot meet a request's member_of or
required-trait sets; these cases pin that the skipping never loses a
candidate (trait or aggregate on a child, on the root, or only on a
sharing provider) and copes with nothing qualifying at all."""

from __future__ import annotations

from support.numbered_providers import (
    aggregates,
    inventory,
    provider,
    traits,
    uuid,
)

AGG_A = "6e9a2b1c-0000-4000-8000-00000000000a"
AGG_S = "6e9a2b1c-0000-4000-8000-00000000000b"


def build(client):
    # Tree 1: root with a child holding VCPU; the child has CUSTOM_T1.
    provider(client, 1)
    provider(client, 2, parent=1)
    inventory(client, uuid(2), VCPU=8)
    traits(client, uuid(2), "CUSTOM_T1")
    # Tree 3: a plain host in aggregate A (on the root).
    provider(client, 3)
    inventory(client, uuid(3), VCPU=8)
    aggregates(client, uuid(3), AGG_A)
    # Tree 4: a host served by a sharing disk pool (5) through aggregate S;
    # only the pool has CUSTOM_POOL.
    provider(client, 4)
    inventory(client, uuid(4), VCPU=8)
    aggregates(client, uuid(4), AGG_S)
    provider(client, 5)
    inventory(client, uuid(5), DISK_GB=1000)
    traits(client, uuid(5), "MISC_SHARES_VIA_AGGREGATE", "CUSTOM_POOL")
    aggregates(client, uuid(5), AGG_S)


def roots(client, query):
    r = client.get("/allocation_candidates?" + query)
    assert r.status_code == 200, r.text
    found = set()
    for req in r.json()["allocation_requests"]:
        found |= set(req["allocations"])
    return found


def test_trait_on_a_child_keeps_its_tree(client):
    build(client)
    assert roots(client, "resources=VCPU:1&required=CUSTOM_T1") == {uuid(2)}


def test_trait_only_on_a_sharing_provider_keeps_the_served_tree(client):
    build(client)
    got = roots(client, "resources=VCPU:1,DISK_GB:10&required=CUSTOM_POOL")
    assert got == {uuid(4), uuid(5)}


def test_aggregate_on_root_or_through_sharing(client):
    build(client)
    assert roots(client, "resources=VCPU:1&member_of=%s" % AGG_A) == {uuid(3)}
    got = roots(client, "resources=VCPU:1,DISK_GB:10&member_of=%s" % AGG_S)
    assert got == {uuid(4), uuid(5)}


def test_any_of_sets_and_suffixed_groups(client):
    build(client)
    query = "resources1=VCPU:1&required1=in:CUSTOM_T1,CUSTOM_POOL&group_policy=none"
    assert roots(client, query) == {uuid(2)}


def test_nothing_qualifies(client):
    build(client)
    client.put("/traits/CUSTOM_NOBODY")
    r = client.get("/allocation_candidates?resources=VCPU:1&required=CUSTOM_NOBODY")
    assert r.status_code == 200
    assert r.json() == {"allocation_requests": [], "provider_summaries": {}}
    r = client.get(
        "/allocation_candidates?resources=VCPU:1&member_of=6e9a2b1c-0000-4000-8000-0000000000ff"
    )
    assert r.json()["allocation_requests"] == []
