"""ReportClient keeps trees cached between passes: idle passes cost no
request until the association refresh interval passes, then one cheap
check; outside changes are seen after it; conflicts still recover."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from berth.client import ProviderTree, ReportClient
from berth.client.agent import ResourceUpdater
from support.api_setup import ok
from support.fake_clock import Clock
from support.injecting import Injecting, injecting_client


class Driver:
    """A root with VCPU and a NUMA-like child with memory."""

    def __init__(self, vcpus: int = 8) -> None:
        self.vcpus = vcpus

    def get_available_nodes(self) -> list[str]:
        return ["cn1"]

    def update_provider_tree(
        self, provider_tree: ProviderTree, nodename: str, allocations: Any = None
    ) -> None:
        provider_tree.update_inventory(nodename, {"VCPU": {"total": self.vcpus}})
        if not provider_tree.exists("cn1_numa0"):
            provider_tree.new_child("cn1_numa0", nodename)
        provider_tree.update_inventory("cn1_numa0", {"MEMORY_MB": {"total": 1024}})


def _agent(direct: httpx.Client, **kw: Any) -> tuple[ResourceUpdater, Injecting, Clock]:
    clock = Clock()
    http, transport = injecting_client(direct)
    client = ReportClient(http, clock=clock, **kw)
    updater = ResourceUpdater(Driver(), client)
    assert updater.update_node("cn1").status == "updated"
    transport.log.clear()
    return updater, transport, clock


def _bump(direct: httpx.Client, provider: str, traits: list[str]) -> None:
    gen = ok(direct.get("/resource_providers/" + provider))["generation"]
    ok(
        direct.put(
            "/resource_providers/%s/traits" % provider,
            json={"traits": traits, "resource_provider_generation": gen},
        )
    )


def test_idle_passes_send_nothing_then_one_cheap_check(direct: httpx.Client) -> None:
    updater, transport, clock = _agent(direct)
    for _ in range(4):  # four minutes, all idle
        clock.now += 60
        result = updater.update_node("cn1")
        assert (result.status, result.writes) == ("unchanged", 0)
    assert transport.log == []
    clock.now += 60  # 300 s since the read
    assert updater.update_node("cn1").status == "unchanged"
    assert len(transport.log) == 1
    assert transport.log[0].startswith("GET /resource_providers?in_tree=")
    transport.log.clear()
    clock.now += 60  # checked: quiet again
    assert updater.update_node("cn1").status == "unchanged"
    assert transport.log == []


def test_outside_changes_are_seen_after_the_interval(direct: httpx.Client) -> None:
    updater, transport, clock = _agent(direct)
    client = updater.client
    numa = client.get_provider_tree_and_ensure_root("cn1").data("cn1_numa0").uuid
    _bump(direct, numa, ["HW_NUMA_ROOT"])  # an operator's edit
    clock.now += 299
    assert (
        not client.get_provider_tree_and_ensure_root("cn1").data(numa).traits
    )  # still the cached view
    clock.now += 1
    tree = client.get_provider_tree_and_ensure_root("cn1")
    assert tree.data(numa).traits == {"HW_NUMA_ROOT"}
    assert len(transport.log) > 2  # the check, then a full read
    transport.log.clear()
    assert updater.update_node("cn1").writes == 0
    assert transport.log == []


def test_conflict_on_a_stale_cache_refreshes_and_retries(direct: httpx.Client) -> None:
    updater, transport, clock = _agent(direct)
    root = updater.client.get_provider_tree_and_ensure_root("cn1").data("cn1").uuid
    _bump(direct, root, ["HW_CPU_X86_AVX"])  # the cache is now stale
    clock.now += 60
    updater.driver = Driver(vcpus=16)
    result = updater.update_node("cn1")
    assert (result.status, result.writes) == ("updated", 1)
    conflicts = [
        line for line in transport.log if line.startswith("PUT /resource_providers/%s/inv" % root)
    ]
    assert len(conflicts) == 2  # 409 once, then written
    inv = ok(direct.get("/resource_providers/%s/inventories" % root))
    assert inv["inventories"]["VCPU"]["total"] == 16
    assert ok(direct.get("/resource_providers/%s/traits" % root))["traits"] == ["HW_CPU_X86_AVX"]


def test_sharing_pool_check_and_zero_interval(direct: httpx.Client) -> None:
    agg = str(uuid.uuid4())
    updater, transport, clock = _agent(direct, association_refresh=0)
    client = updater.client
    tree = client.get_provider_tree_and_ensure_root("cn1")
    tree.update_aggregates("cn1", [agg])
    client.update_from_provider_tree(tree)  # aggregates changed: recheck
    transport.log.clear()
    clock.now += 10_000
    client.get_provider_tree_and_ensure_root("cn1")
    assert [line.split("?")[0] for line in transport.log] == [
        "GET /resource_providers",
        "GET /resource_providers",
    ]  # tree, sharing
    transport.log.clear()
    clock.now += 10_000  # 0: never again
    assert updater.update_node("cn1").writes == 0
    assert transport.log == []
    client.clear_provider_cache()
    client.get_provider_tree_and_ensure_root("cn1")
    assert len(transport.log) > 2
    with pytest.raises(ValueError):
        ReportClient(direct, association_refresh=-1)
