"""ReportClient with ``change_feed=True``: one feed read per refresh
interval for all its trees instead of a check per tree; changes by others
are applied or re-read on the next refresh; a pruned history, upstream
Placement and a forbidding policy each fall back as documented."""

from __future__ import annotations

import logging
import uuid
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest

from berth.client import ProviderTree, ReportClient
from berth.client.agent import ResourceUpdater
from support.api_setup import ok
from support.fake_clock import Clock
from support.injecting import Injecting, Rule, injecting_client

FEED = "GET /berth/changes?"


class Driver:
    """Two compute nodes, each a root with VCPU and a child with memory."""

    def __init__(self, vcpus: int = 8) -> None:
        self.vcpus = vcpus

    def get_available_nodes(self) -> list[str]:
        return ["cn1", "cn2"]

    def update_provider_tree(
        self, provider_tree: ProviderTree, nodename: str, allocations: Any = None
    ) -> None:
        provider_tree.update_inventory(nodename, {"VCPU": {"total": self.vcpus}})
        child = nodename + "_numa0"
        if not provider_tree.exists(child):
            provider_tree.new_child(child, nodename)
        provider_tree.update_inventory(child, {"MEMORY_MB": {"total": 1024}})


def _agent(direct: httpx.Client, **kw: Any) -> tuple[ResourceUpdater, Injecting, Clock]:
    clock = Clock()
    http, transport = injecting_client(direct)
    client = ReportClient(http, clock=clock, association_refresh=60, change_feed=True, **kw)
    updater = ResourceUpdater(Driver(), client)
    assert {r.status for r in updater.update_all()} == {"updated"}
    transport.log.clear()
    return updater, transport, clock


def _uuid(direct: httpx.Client, name: str) -> str:
    found = ok(direct.get("/resource_providers?name=" + name))
    return str(found["resource_providers"][0]["uuid"])


def _put(direct: httpx.Client, provider: str, what: str, body: dict[str, Any]) -> None:
    gen = ok(direct.get("/resource_providers/" + provider))["generation"]
    ok(
        direct.put(
            "/resource_providers/%s/%s" % (provider, what),
            json={**body, "resource_provider_generation": gen},
        )
    )


def _idle_rounds(updater: ResourceUpdater, clock: Clock, rounds: int) -> None:
    for _ in range(rounds):
        clock.now += 60
        assert {(r.status, r.writes) for r in updater.update_all()} == {("unchanged", 0)}


def test_nothing_changed_costs_one_feed_read_per_interval(direct: httpx.Client) -> None:
    updater, transport, clock = _agent(direct)
    clock.now += 30  # within the interval: nothing
    updater.update_all()
    assert transport.log == []
    _idle_rounds(updater, clock, 5)
    # Two trees, five intervals: one feed read each, no tree read at all
    # (the agent's own writes came back as events and changed nothing).
    assert len(transport.log) == 5
    assert all(line.startswith(FEED) for line in transport.log)
    # The one request names both trees.
    query = parse_qs(urlsplit(transport.log[0]).query)
    assert sorted(query["tree"][0].split(",")) == sorted(
        [_uuid(direct, "cn1"), _uuid(direct, "cn2")]
    )


def test_a_trait_set_by_another_client_is_applied_without_a_read(direct: httpx.Client) -> None:
    updater, transport, clock = _agent(direct)
    client = updater.client
    numa = _uuid(direct, "cn2_numa0")
    _put(direct, numa, "traits", {"traits": ["HW_NUMA_ROOT"]})
    clock.now += 59  # not yet due: the cached view
    assert not client.get_provider_tree_and_ensure_root("cn2").data(numa).traits
    clock.now += 1
    tree = client.get_provider_tree_and_ensure_root("cn2")
    assert tree.data(numa).traits == {"HW_NUMA_ROOT"}
    assert tree.data(numa).generation == ok(direct.get("/resource_providers/" + numa))["generation"]
    assert len(transport.log) == 1 and transport.log[0].startswith(FEED)
    transport.log.clear()
    assert {r.writes for r in updater.update_all()} == {0}
    assert transport.log == []  # the driver keeps the trait


def test_an_aggregate_set_by_another_client_rereads_that_tree_only(direct: httpx.Client) -> None:
    updater, transport, clock = _agent(direct)
    cn1, agg = _uuid(direct, "cn1"), str(uuid.uuid4())
    _put(direct, cn1, "aggregates", {"aggregates": [agg]})
    clock.now += 60
    updater.update_all()
    tree = updater.client.get_provider_tree_and_ensure_root("cn1")
    assert tree.data(cn1).aggregates == {agg}
    assert transport.log[0].startswith(FEED)
    # cn1's tree is read again (it may have a sharing provider now);
    # cn2's is not touched.
    reread = [line for line in transport.log[1:] if "in_tree=" in line]
    assert reread == ["GET /resource_providers?in_tree=" + cn1]
    assert not any(_uuid(direct, "cn2") in line for line in transport.log[1:])


def test_a_new_sharing_provider_in_our_aggregate_is_noticed(direct: httpx.Client) -> None:
    agg = str(uuid.uuid4())
    updater, transport, clock = _agent(direct)
    client = updater.client
    tree = client.get_provider_tree_and_ensure_root("cn1")
    tree.update_aggregates("cn1", [agg])
    client.update_from_provider_tree(tree)
    client.get_provider_tree_and_ensure_root("cn1")
    pool = ok(direct.post("/resource_providers", json={"name": "pool"}))
    _put(direct, pool["uuid"], "aggregates", {"aggregates": [agg]})
    _put(direct, pool["uuid"], "traits", {"traits": ["MISC_SHARES_VIA_AGGREGATE"]})
    clock.now += 60
    assert pool["uuid"] in client.get_provider_tree_and_ensure_root("cn1").roots


def test_a_pruned_history_rereads_every_tree_and_follows_on(direct: httpx.Client) -> None:
    updater, transport, clock = _agent(direct)
    follower = updater.client._feed
    assert follower is not None and follower.position is not None
    transport.rules.append(Rule(FEED, status=410))
    numa = _uuid(direct, "cn1_numa0")
    _put(direct, numa, "traits", {"traits": ["HW_NUMA_ROOT"]})
    clock.now += 60
    updater.update_all()
    # The 410, then both trees read whole; the feed is followed from the
    # first of those listings' positions.
    assert transport.log[0].startswith(FEED)
    assert sum("in_tree=" in line for line in transport.log) == 2
    assert follower.position is not None
    assert updater.client.get_provider_tree_and_ensure_root("cn1").data(numa).traits == {
        "HW_NUMA_ROOT"
    }
    transport.log.clear()
    _idle_rounds(updater, clock, 2)
    assert len(transport.log) == 2
    assert all(line.startswith(FEED) for line in transport.log)


@pytest.mark.parametrize("status", [403, 404])
def test_a_forbidden_or_missing_feed_falls_back_to_checking_each_tree(
    direct: httpx.Client, status: int, caplog: pytest.LogCaptureFixture
) -> None:
    updater, transport, clock = _agent(direct)
    transport.rules.append(Rule(FEED, times=100, status=status))
    numa = _uuid(direct, "cn1_numa0")
    _put(direct, numa, "traits", {"traits": ["HW_NUMA_ROOT"]})
    with caplog.at_level(logging.WARNING, "berth.client.feed"):
        for _ in range(3):
            clock.now += 60
            updater.update_all()
    assert sum(line.startswith(FEED) for line in transport.log) == 1
    assert len([r for r in caplog.records if "not following the change feed" in r.message]) == 1
    # Today's per-tree check every interval: it saw the trait.
    assert sum(line.startswith("GET /resource_providers?in_tree=") for line in transport.log) >= 6
    assert updater.client.get_provider_tree_and_ensure_root("cn1").data(numa).traits == {
        "HW_NUMA_ROOT"
    }


class NoPosition(httpx.BaseTransport):
    """Upstream Placement: answers carry no Berth-Position header."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        response.headers.pop("berth-position", None)
        return response


def test_a_service_without_positions_is_never_asked_for_the_feed(
    direct: httpx.Client, caplog: pytest.LogCaptureFixture
) -> None:
    inner = NoPosition(direct._transport)
    upstream = httpx.Client(transport=inner, base_url=direct.base_url, headers=direct.headers)
    with caplog.at_level(logging.WARNING, "berth.client.feed"):
        updater, transport, clock = _agent(upstream)
        for _ in range(5):
            clock.now += 60
            updater.update_all()
    assert not any(line.startswith(FEED) for line in transport.log)
    assert len([r for r in caplog.records if "no Berth-Position" in r.message]) == 1
    assert (
        sum(line.startswith("GET /resource_providers?in_tree=") for line in transport.log) == 10
    )  # each tree, each interval


def test_a_claim_costs_one_conflict_on_the_next_write(direct: httpx.Client) -> None:
    """Claims are not followed (docs/client.md): the first inventory
    write after one answers 409, the tree is read again, and the pass
    starts again and writes."""
    updater, transport, clock = _agent(direct)
    cn1 = _uuid(direct, "cn1")
    consumer = str(uuid.uuid4())
    ok(
        direct.put(
            "/allocations/" + consumer,
            json={
                "allocations": {cn1: {"resources": {"VCPU": 1}}},
                "project_id": str(uuid.uuid4()),
                "user_id": str(uuid.uuid4()),
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            },
        ),
        204,
    )
    clock.now += 60
    updater.driver = Driver(vcpus=16)
    results = {r.nodename: r for r in updater.update_all()}
    assert results["cn1"].status == "updated"
    assert transport.log[0].startswith(FEED)
    assert "allocations" not in transport.log[0]  # claims are not read
    puts = [
        line for line in transport.log if line.startswith("PUT /resource_providers/%s/inv" % cn1)
    ]
    assert len(puts) == 2  # 409 once, then written
    assert (
        ok(direct.get("/resource_providers/%s/inventories" % cn1))["inventories"]["VCPU"]["total"]
        == 16
    )
    assert (
        ok(direct.get("/resource_providers/%s/inventories" % cn1))["inventories"]["VCPU"]["total"]
        == 16
    )
