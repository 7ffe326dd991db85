"""ReportClient against the real app: operator fields kept, atomic
reshapes under injected failures, re-parenting, sharing providers and
the Nova-shaped allocation calls."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import pytest

from berth.client import (
    AllocationUpdateFailed,
    ProviderTree,
    ReportClient,
    ReshapeFailed,
    move_allocations,
)
from berth.client.agent import ResourceUpdater
from berth.db.engine import Database
from berth.direct import PlacementDirect
from support.api_setup import PROJECT, USER, allocate, ok
from support.injecting import Rule, injecting_client
from tests.conftest import make_conf

C1, C2, C3 = (str(uuid.UUID(int=i)) for i in (101, 102, 103))


def full_state(http: httpx.Client) -> dict[str, Any]:
    """Every provider with what a flush or reshape may change."""
    result = {}
    for rp in ok(http.get("/resource_providers"))["resource_providers"]:
        path = "/resource_providers/" + rp["uuid"]
        result[rp["uuid"]] = {
            "name": rp["name"],
            "parent": rp["parent_provider_uuid"],
            "generation": rp["generation"],
            "inventories": ok(http.get(path + "/inventories"))["inventories"],
            "traits": ok(http.get(path + "/traits"))["traits"],
            "aggregates": ok(http.get(path + "/aggregates"))["aggregates"],
            "allocations": ok(http.get(path + "/allocations"))["allocations"],
        }
    return result


class FixedDriver:
    """Reports a fixed root inventory: only ``total``s."""

    def __init__(self, totals: dict[str, int]) -> None:
        self.totals = totals

    def get_available_nodes(self) -> list[str]:
        return ["cn1"]

    def update_provider_tree(
        self, provider_tree: ProviderTree, nodename: str, allocations: Any = None
    ) -> None:
        provider_tree.update_inventory(
            nodename, {rc: {"total": n} for rc, n in self.totals.items()}
        )


def test_operator_fields_survive_idle_passes_and_a_total_change(direct: httpx.Client) -> None:
    client = ReportClient(direct)
    updater = ResourceUpdater(FixedDriver({"VCPU": 16}), client)
    assert updater.update_node("cn1").status == "updated"
    root = client.get_provider_tree_and_ensure_root("cn1").data("cn1").uuid
    gen = ok(direct.get("/resource_providers/" + root))["generation"]
    # The operator sets a ratio and a reserved amount by hand.
    ok(
        direct.put(
            "/resource_providers/%s/inventories/VCPU" % root,
            json={
                "resource_provider_generation": gen,
                "total": 16,
                "reserved": 2,
                "allocation_ratio": 4.0,
            },
        )
    )
    updater = ResourceUpdater(FixedDriver({"VCPU": 16}), ReportClient(direct))
    before = full_state(direct)
    for _ in range(100):
        result = updater.update_node("cn1")
        assert (result.status, result.writes) == ("unchanged", 0)
    assert full_state(direct) == before
    updater.driver = FixedDriver({"VCPU": 32})
    result = updater.update_node("cn1")
    assert (result.status, result.writes) == ("updated", 1)
    vcpu = ok(direct.get("/resource_providers/%s/inventories/VCPU" % root))
    assert (vcpu["total"], vcpu["reserved"], vcpu["allocation_ratio"]) == (32, 2, 4.0)


def _old_layout(http: httpx.Client) -> str:
    """cn1 with VCPU and VGPU on the root, an empty stale child, and three
    consumers holding VGPU (and VCPU) on the root."""
    client = ReportClient(http)
    tree = client.get_provider_tree_and_ensure_root("cn1")
    root = tree.data("cn1").uuid
    tree.update_inventory(root, {"VCPU": {"total": 8}, "VGPU": {"total": 4}})
    tree.new_child("cn1_stale", root)
    client.update_from_provider_tree(tree)
    for consumer, vgpu in ((C1, 2), (C2, 1), (C3, 1)):
        ok(allocate(http, consumer, {root: {"VGPU": vgpu, "VCPU": 1}}), 204)
    return root


def _reshape(client: ReportClient, child_vgpu: int = 4) -> tuple[ProviderTree, Any]:
    """The new layout: VGPU on a new child (with a grandchild), the stale
    child gone; allocations moved along."""
    tree = client.get_provider_tree_and_ensure_root("cn1")
    root = tree.data("cn1").uuid
    tree.remove("cn1_stale")
    gpu = tree.new_child("cn1_gpu0", root)
    tree.new_child("cn1_gpu0_fn", gpu)
    tree.move_inventory(root, gpu, "VGPU", {"total": child_vgpu})
    tree.update_traits(gpu, ["CUSTOM_PGPU"])
    allocations = client.get_allocations_for_provider_tree(None, "cn1")  # Nova
    move_allocations(allocations, root, gpu, "VGPU")
    return tree, allocations


@pytest.mark.parametrize("failure", ["conflict", "capacity", "error-reshaper", "error-create"])
def test_failed_reshape_leaves_the_service_as_it_was(direct: httpx.Client, failure: str) -> None:
    root = _old_layout(direct)
    http, transport = injecting_client(direct)
    client = ReportClient(http)
    tree, allocations = _reshape(client, child_vgpu=1 if failure == "capacity" else 4)
    before = full_state(direct)
    if failure == "conflict":

        def other_writer() -> None:  # bumps the root's generation
            gen = ok(direct.get("/resource_providers/" + root))["generation"]
            ok(
                direct.put(
                    "/resource_providers/%s/traits" % root,
                    json={"traits": ["HW_CPU_X86_AVX"], "resource_provider_generation": gen},
                )
            )

        transport.rules.append(Rule("POST /reshaper", status=None, before=other_writer))
        before[root]["generation"] += 1
        before[root]["traits"] = ["HW_CPU_X86_AVX"]
    elif failure == "error-reshaper":
        transport.rules.append(Rule("POST /reshaper"))
    elif failure == "error-create":  # the grandchild's creation fails
        transport.rules.append(Rule("POST /resource_providers", skip=1))
    with pytest.raises(ReshapeFailed) as info:
        client.update_from_provider_tree(tree, allocations=allocations)
    assert "nothing of it was applied" in str(info.value)
    assert info.value.is_conflict == (failure == "conflict")
    assert full_state(direct) == before
    # The cache was refreshed: a new attempt starts from the truth.
    tree, allocations = _reshape(client)
    assert client.update_from_provider_tree(tree, allocations=allocations)
    after = full_state(direct)
    assert set(after) == set(tree.get_provider_uuids())  # stale gone
    [gpu] = [u for u, s in after.items() if s["name"] == "cn1_gpu0"]
    assert after[gpu]["inventories"]["VGPU"]["total"] == 4
    assert after[gpu]["allocations"][C1]["resources"] == {"VGPU": 2}
    assert after[root]["inventories"].keys() == {"VCPU"}


def test_failed_undo_names_the_provider_left_behind(direct: httpx.Client) -> None:
    _old_layout(direct)
    http, transport = injecting_client(direct)
    client = ReportClient(http)
    tree, allocations = _reshape(client)
    transport.rules += [Rule("POST /reshaper"), Rule("DELETE /resource_providers/", times=1)]
    with pytest.raises(ReshapeFailed) as info:
        client.update_from_provider_tree(tree, allocations=allocations)
    grand = tree.data("cn1_gpu0_fn").uuid
    gpu = tree.data("cn1_gpu0").uuid
    # The grandchild's DELETE failed; its parent's was then refused
    # (a provider with a child cannot be deleted): both are named, and
    # both are empty.
    assert "could not be deleted again" in str(info.value)
    assert grand in str(info.value) and gpu in str(info.value)
    left = full_state(direct)
    for uuid_ in (grand, gpu):
        assert left[uuid_]["inventories"] == {}
        assert left[uuid_]["allocations"] == {}


def test_startup_reshape_failure_is_fatal(direct: httpx.Client) -> None:
    _old_layout(direct)
    from berth.examples.vgpu import VGPUDriver

    layout = {"cn1": {"vcpus": 8, "memory_mb": 0, "gpus": {"gpu0": 4}}}
    http, transport = injecting_client(direct)
    transport.rules.append(Rule("POST /reshaper", times=10))
    updater = ResourceUpdater(VGPUDriver(layout), ReportClient(http))
    with pytest.raises(ReshapeFailed):
        updater.update_node("cn1", startup=True)


class TwiceDriver:
    """A buggy driver: asks for a reshape even when given allocations."""

    def get_available_nodes(self) -> list[str]:
        return ["cn1"]

    def update_provider_tree(
        self, provider_tree: ProviderTree, nodename: str, allocations: Any = None
    ) -> None:
        from berth.client import ReshapeNeeded

        raise ReshapeNeeded("always")


def test_reshape_needed_with_allocations_is_fatal(direct: httpx.Client) -> None:
    updater = ResourceUpdater(TwiceDriver(), ReportClient(direct))
    with pytest.raises(ReshapeFailed, match="although it was given"):
        updater.update_node("cn1", startup=True)
    assert updater.update_node("cn1").status == "failed"  # periodic


def test_reparenting_is_flushed(direct: httpx.Client) -> None:
    client = ReportClient(direct)
    tree = client.get_provider_tree_and_ensure_root("cn1")
    root = tree.data("cn1").uuid
    pf = tree.new_child("cn1_pf0", root)
    client.update_from_provider_tree(tree)
    tree = client.get_provider_tree_and_ensure_root("cn1")
    numa = tree.new_child("cn1_numa0", root)
    tree.reparent(pf, numa)
    assert client.update_from_provider_tree(tree) == 2
    row = ok(direct.get("/resource_providers/" + pf))
    assert row["parent_provider_uuid"] == numa
    # Nova's way (remove, then re-add with the same uuid) works as well.
    tree = client.get_provider_tree_and_ensure_root("cn1")
    tree.remove(pf)
    tree.new_child("cn1_pf0", root, pf)
    assert client.update_from_provider_tree(tree) == 1
    assert ok(direct.get("/resource_providers/" + pf))["parent_provider_uuid"] == root
    assert client.update_from_provider_tree(client.get_provider_tree_and_ensure_root("cn1")) == 0


def _sharing_pool(http: httpx.Client, agg: str) -> str:
    client = ReportClient(http)
    tree = client.get_provider_tree_and_ensure_root("pool")
    pool = tree.data("pool").uuid
    tree.update_inventory(pool, {"DISK_GB": {"total": 1000}})
    tree.update_traits(pool, ["MISC_SHARES_VIA_AGGREGATE"])
    tree.update_aggregates(pool, [agg])
    client.update_from_provider_tree(tree)
    return pool


def test_sharing_providers_join_the_tree_nova_style(direct: httpx.Client) -> None:
    agg = str(uuid.uuid4())
    pool = _sharing_pool(direct, agg)
    client = ReportClient(direct)
    rp_uuid = str(uuid.uuid4())
    # Nova's arguments: (context, rp_uuid, name=...).
    tree = client.get_provider_tree_and_ensure_root(None, rp_uuid, name="cn1")
    assert tree.roots == [rp_uuid] and not tree.has_sharing_provider("DISK_GB")
    tree.update_aggregates(rp_uuid, [agg])
    client.update_from_provider_tree(None, tree)  # Nova's arguments
    tree = client.get_provider_tree_and_ensure_root(None, rp_uuid)
    assert tree.roots == [rp_uuid, pool]
    assert tree.has_sharing_provider("DISK_GB")
    assert tree.data(rp_uuid).name == "cn1"
    # Left unchanged, the pool is not written; Berth's arguments work too.
    assert client.update_from_provider_tree(tree) == 0
    assert client.get_provider_tree_and_ensure_root("cn1").roots == [rp_uuid, pool]


def _claim(
    client: ReportClient, consumer: str, allocs: dict[str, Any], generation: int | None = None
) -> bool:
    return client.claim_resources(
        None,
        consumer,
        {"allocations": {rp: {"resources": r} for rp, r in allocs.items()}},
        PROJECT,
        USER,
        "1.28",
        consumer_generation=generation,
    )


def test_allocation_calls(direct: httpx.Client) -> None:
    agg = str(uuid.uuid4())
    pool = _sharing_pool(direct, agg)
    client = ReportClient(direct)
    tree = client.get_provider_tree_and_ensure_root("cn1")
    root = tree.data("cn1").uuid
    tree.update_inventory(root, {"VCPU": {"total": 8}})
    client.update_from_provider_tree(tree)

    assert _claim(client, C1, {root: {"VCPU": 2}, pool: {"DISK_GB": 10}})
    assert not _claim(client, C2, {root: {"VCPU": 99}})  # no capacity
    with pytest.raises(AllocationUpdateFailed):  # stale generation
        _claim(client, C1, {root: {"VCPU": 1}}, generation=None)
    got = client.get_allocs_for_consumer(None, C1)
    assert got["allocations"][root]["resources"] == {"VCPU": 2}
    assert got["consumer_generation"] == 1

    assert client.remove_resources_from_instance_allocation(
        None, C1, {root: {"resources": {"VCPU": 1}}}
    )
    with pytest.raises(AllocationUpdateFailed):
        client.remove_resources_from_instance_allocation(
            None, C1, {root: {"resources": {"VCPU": 5}}}
        )
    assert client.move_allocations(None, C1, C2)
    assert client.get_allocs_for_consumer(None, C1)["allocations"] == {}
    assert client.move_allocations(None, C1, C2)  # already moved
    moved = client.get_allocs_for_consumer(None, C2)["allocations"]
    assert {rp: e["resources"] for rp, e in moved.items()} == {
        root: {"VCPU": 1},
        pool: {"DISK_GB": 10},
    }

    assert client.remove_provider_tree_from_instance_allocation(None, C2, root)
    left = client.get_allocs_for_consumer(None, C2)["allocations"]
    assert list(left) == [pool]  # sharing kept
    assert client.delete_allocation_for_instance(None, C2)
    assert not client.delete_allocation_for_instance(None, C2)
    assert _claim(client, C3, {root: {"VCPU": 1}})
    assert client.delete_allocation_for_instance(None, C3, force=True)
    assert not client.delete_allocation_for_instance(None, C3, force=True)


def test_allocation_calls_retry_consumer_conflicts(direct: httpx.Client) -> None:
    client = ReportClient(direct)
    tree = client.get_provider_tree_and_ensure_root("cn1")
    root = tree.data("cn1").uuid
    tree.update_inventory(root, {"VCPU": {"total": 8}})
    client.update_from_provider_tree(tree)
    assert _claim(client, C1, {root: {"VCPU": 4}})

    def other_writer() -> None:  # changes C1 between our read and write
        gen = ok(direct.get("/allocations/" + C1))["consumer_generation"]
        ok(allocate(direct, C1, {root: {"VCPU": 3}}, gen), 204)

    http, transport = injecting_client(direct)
    transport.rules.append(Rule("PUT /allocations/", status=None, before=other_writer))
    racing = ReportClient(http)
    assert racing.remove_resources_from_instance_allocation(
        None, C1, {root: {"resources": {"VCPU": 1}}}
    )
    # The retry read the other writer's 3 and removed 1 from it.
    assert client.get_allocs_for_consumer(None, C1)["allocations"][root]["resources"] == {"VCPU": 2}

    transport.rules.append(Rule("PUT /allocations/", status=None, times=2, before=other_writer))
    bounded = ReportClient(http, retries=2)
    with pytest.raises(AllocationUpdateFailed, match="2 generation"):
        bounded.delete_allocation_for_instance(None, C1)
    assert client.get_allocs_for_consumer(None, C1)["allocations"]


def test_direct_accepts_upstreams_latest_microversion(db: Database) -> None:
    with PlacementDirect(make_conf(), db, latest_microversion=True) as http:
        answer = http.get("/")
        assert answer.headers["openstack-api-version"].startswith("placement 1.3")
    with pytest.raises(ValueError):
        PlacementDirect(make_conf(), db, "1.10", latest_microversion=True)
