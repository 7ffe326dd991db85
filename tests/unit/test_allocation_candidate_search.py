"""The candidate search on hand-made worlds (no database, no HTTP)."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from os_traits import MISC_SHARES_VIA_AGGREGATE as SHARING_TRAIT

from berth.domain.allocation_candidate.engine import search
from berth.domain.allocation_candidate.merge import Candidate
from berth.domain.allocation_candidate.offers import GroupSpec
from berth.domain.allocation_candidate.request import Order, RequestGroup, RequestWide, Settings
from berth.domain.allocation_candidate.world import World
from berth.domain.capacity import Inventory
from support.candidate_worlds import group, prov


def run(world: World, groups: list[RequestGroup], **wide: Any) -> list[Candidate]:
    settings = wide.pop("settings", Settings())
    nested = wide.pop("nested_aware", True)
    return search(
        world, [GroupSpec(g) for g in groups], RequestWide(**wide), settings, nested_aware=nested
    )


def shape(cands: list[Candidate]) -> list[dict[int, dict[str, int]]]:
    return [c.allocs for c in cands]


def two_computes_one_pool() -> World:
    return World(
        [
            prov(1, inv={"VCPU": 8}, aggs=("A",)),
            prov(2, inv={"VCPU": 8}, aggs=("A",)),
            prov(3, inv={"DISK_GB": 100}, traits=(SHARING_TRAIT,), aggs=("A",)),
        ]
    )


def test_single_provider() -> None:
    world = World([prov(1, inv={"VCPU": 4, "MEMORY_MB": 1024})])
    cands = run(world, [group(resources={"VCPU": 2, "MEMORY_MB": 512})])
    assert shape(cands) == [{1: {"VCPU": 2, "MEMORY_MB": 512}}]
    assert cands[0].mappings == {"": (1,)}


def test_capacity_usage_reserved_ratio_units() -> None:
    world = World(
        [
            prov(
                1,
                inv={"VCPU": Inventory(total=4, reserved=1, allocation_ratio=2.0)},
                used={"VCPU": 5},
            ),
            prov(2, inv={"VCPU": Inventory(total=8, max_unit=2)}),
            prov(3, inv={"VCPU": Inventory(total=8, step_size=3)}),
        ]
    )
    assert shape(run(world, [group(resources={"VCPU": 1})])) == [{1: {"VCPU": 1}}, {2: {"VCPU": 1}}]
    assert shape(run(world, [group(resources={"VCPU": 3})])) == [{3: {"VCPU": 3}}]


def test_sharing_pool_serves_every_tree() -> None:
    world = two_computes_one_pool()
    cands = run(world, [group(resources={"VCPU": 1, "DISK_GB": 10})])
    assert shape(cands) == [
        {1: {"VCPU": 1}, 3: {"DISK_GB": 10}},
        {2: {"VCPU": 1}, 3: {"DISK_GB": 10}},
    ]
    # The pool alone is one candidate, however many trees it serves.
    assert shape(run(world, [group(resources={"DISK_GB": 10})])) == [{3: {"DISK_GB": 10}}]


def test_shared_unsuffixed_group_keeps_every_tree() -> None:
    """Upstream keeps one tree here (its per-group sets merge the pool's
    offers to different trees); both trees are valid."""
    world = two_computes_one_pool()
    cands = run(world, [group(resources={"DISK_GB": 10}), group("1", resources={"VCPU": 1})])
    assert shape(cands) == [
        {3: {"DISK_GB": 10}, 1: {"VCPU": 1}},
        {3: {"DISK_GB": 10}, 2: {"VCPU": 1}},
    ]
    assert [c.mappings for c in cands] == [{"": (3,), "1": (1,)}, {"": (3,), "1": (2,)}]


def test_same_class_in_two_groups_adds_up_once() -> None:
    """Upstream may add amounts into shared objects here; each candidate
    must carry exactly the sum of what its groups asked."""
    world = World([prov(1, inv={"VCPU": 8}), prov(2, inv={"VCPU": 8})])
    groups = [group(resources={"VCPU": 1}), group("1", resources={"VCPU": 2})]
    first = run(world, groups)
    assert shape(first) == [{1: {"VCPU": 3}}, {2: {"VCPU": 3}}]
    assert shape(run(world, groups)) == shape(first)


def test_merged_amounts_respect_capacity_and_max_unit() -> None:
    world = World([prov(1, inv={"VCPU": Inventory(total=5, max_unit=4)})])
    groups = [group("1", resources={"VCPU": 2}), group("2", resources={"VCPU": 2})]
    assert len(run(world, groups, group_policy="none")) == 1
    groups[1] = group("2", resources={"VCPU": 3})
    assert run(world, groups, group_policy="none") == []


def nic_tree() -> World:
    return World(
        [
            prov(1, inv={"VCPU": 8}),
            prov(2, root=1, parent=1, inv={"SRIOV_NET_VF": 4}, traits=("P1",)),
            prov(3, root=1, parent=1, inv={"SRIOV_NET_VF": 4}, traits=("P2",)),
        ]
    )


def test_group_policy() -> None:
    groups = [group("1", resources={"SRIOV_NET_VF": 1}), group("2", resources={"SRIOV_NET_VF": 1})]
    assert len(run(nic_tree(), groups, group_policy="none")) == 4
    isolated = run(nic_tree(), groups, group_policy="isolate")
    assert [c.mappings for c in isolated] == [{"1": (2,), "2": (3,)}, {"1": (3,), "2": (2,)}]


def test_traits_on_spread_group_are_collective() -> None:
    world = nic_tree()
    cands = run(
        world, [group(resources={"VCPU": 1, "SRIOV_NET_VF": 1}, required=(frozenset({"P2"}),))]
    )
    assert shape(cands) == [{1: {"VCPU": 1}, 3: {"SRIOV_NET_VF": 1}}]
    cands = run(
        world, [group(resources={"VCPU": 1, "SRIOV_NET_VF": 1}, forbidden=frozenset({"P2"}))]
    )
    assert shape(cands) == [{1: {"VCPU": 1}, 2: {"SRIOV_NET_VF": 1}}]


def test_aggregate_on_root_spans_tree_for_unsuffixed_group() -> None:
    world = World(
        [
            prov(1, inv={"VCPU": 8}, aggs=("A",)),
            prov(2, root=1, parent=1, inv={"SRIOV_NET_VF": 4}),
        ]
    )
    member = (frozenset({"A"}),)
    assert len(run(world, [group(resources={"SRIOV_NET_VF": 1}, member_of=member)])) == 1
    # A suffixed group needs the provider itself in the aggregate.
    assert run(world, [group("1", resources={"SRIOV_NET_VF": 1}, member_of=member)]) == []


def test_same_subtree() -> None:
    world = World(
        [
            prov(1, inv={"VCPU": 8}),
            prov(2, root=1, parent=1, traits=("NUMA",), inv={"MEMORY_MB": 64}),
            prov(3, root=1, parent=2, inv={"SRIOV_NET_VF": 2}),
            prov(4, root=1, parent=1, traits=("NUMA",), inv={"MEMORY_MB": 64}),
        ]
    )
    groups = [group("_M", resources={"MEMORY_MB": 1}), group("_N", resources={"SRIOV_NET_VF": 1})]
    cands = run(world, groups, group_policy="none", same_subtrees=(frozenset({"_M", "_N"}),))
    assert [c.mappings for c in cands] == [{"_M": (2,), "_N": (3,)}]
    # A resourceless group names the subtree root.
    groups = [
        group("_N", resources={"SRIOV_NET_VF": 1}),
        group("_R", required=(frozenset({"NUMA"}),)),
    ]
    cands = run(world, groups, group_policy="none", same_subtrees=(frozenset({"_N", "_R"}),))
    assert [c.mappings for c in cands] == [{"_N": (3,), "_R": (2,)}]
    assert shape(cands) == [{3: {"SRIOV_NET_VF": 1}}]


def test_root_required() -> None:
    world = World([prov(1, inv={"VCPU": 8}, traits=("GOLD",)), prov(2, inv={"VCPU": 8})])
    g = [group(resources={"VCPU": 1})]
    assert shape(run(world, g, root_required=frozenset({"GOLD"}))) == [{1: {"VCPU": 1}}]
    assert shape(run(world, g, root_forbidden=frozenset({"GOLD"}))) == [{2: {"VCPU": 1}}]


def test_old_versions_use_one_provider_per_tree() -> None:
    g = [group(resources={"VCPU": 1, "SRIOV_NET_VF": 1})]
    assert len(run(nic_tree(), g)) == 2
    assert run(nic_tree(), g, nested_aware=False) == []


def test_limit_is_a_prefix_of_the_full_answer() -> None:
    world = World([prov(i, inv={"VCPU": 4}) for i in range(1, 30)])
    g = [group(resources={"VCPU": 1})]
    full = run(world, g)
    assert shape(run(world, g, limit=7)) == shape(full)[:7]
    capped = run(world, g, settings=Settings(max_candidates=5))
    assert shape(capped) == shape(full)[:5]


def test_randomized_sample_is_valid() -> None:
    world = World([prov(i, inv={"VCPU": 4}) for i in range(1, 30)])
    g = [group(resources={"VCPU": 1})]
    full = {c.key() for c in run(world, g)}
    picked = run(world, g, limit=5, settings=Settings(order=Order("random")))
    assert len(picked) == 5 and {c.key() for c in picked} <= full


def test_breadth_first_takes_from_every_anchor_in_turn() -> None:
    world = World(
        [
            prov(1),
            prov(2, root=1, parent=1, inv={"VF": 1}),
            prov(3, root=1, parent=1, inv={"VF": 1}),
            prov(4),
            prov(5, root=4, parent=4, inv={"VF": 1}),
            prov(6, root=4, parent=4, inv={"VF": 1}),
        ]
    )
    g = [group("1", resources={"VF": 1}), group("2", resources={"VF": 1})]
    settings = Settings(strategy="breadth-first", max_candidates=2)
    cands = run(world, g, group_policy="isolate", settings=settings)
    assert [c.anchor for c in cands] == [1, 4]
    settings = Settings(strategy="depth-first", max_candidates=2)
    cands = run(world, g, group_policy="isolate", settings=settings)
    assert [c.anchor for c in cands] == [1, 1]


def test_wide_tree_explosion_stops_at_limit() -> None:
    pfs = [prov(i, root=1, parent=1, inv={"VF": 1}) for i in range(2, 23)]
    world = World([prov(1, inv={"VCPU": 8})] + pfs)
    groups = [group(str(i), resources={"VF": 1}) for i in range(1, 17)]
    cands = run(world, groups, group_policy="none", limit=1000)
    assert len(cands) == 1000
    for cand in itertools.islice(cands, 50):
        assert len(cand.allocs) == 16  # one VF each, never two on one PF


def test_hopeless_wide_request_ends_without_walking_permutations() -> None:
    """22 one-VF groups cannot fit 21 one-VF providers; the supply bound
    says so before any of the 21! orderings is tried."""
    pfs = [prov(i, root=1, parent=1, inv={"VF": 1}) for i in range(2, 23)]
    world = World([prov(1, inv={"VCPU": 8})] + pfs)
    groups = [group(str(i), resources={"VF": 1}) for i in range(1, 23)]
    assert run(world, groups, group_policy="none") == []


def wide_computes(computes: int, pfs: int, vfs: int) -> World:
    """``computes`` hosts, each with ``pfs`` children of ``vfs`` VFs:
    upstream's wide-tree reproducer, where every candidate of a host is
    a permutation of equivalent devices."""
    providers = []
    for c in range(computes):
        root = 1000 * (c + 1)
        providers.append(prov(root, inv={"VCPU": 8}))
        providers += [
            prov(root + i, root=root, parent=root, inv={"SRIOV_NET_VF": vfs})
            for i in range(1, pfs + 1)
        ]
    return World(providers)


@pytest.mark.parametrize("groups", [4, 6])
def test_limit_reaches_every_host_before_a_second_candidate(groups: int) -> None:
    # Nova asks for max_placement_results (1,000): depth-first, every
    # candidate is a permutation of VFs on the first host; by default
    # each host's first comes before any host's second.
    world = wide_computes(2, 8, 8)
    g = [group(str(i), resources={"SRIOV_NET_VF": 1}) for i in range(1, groups + 1)]
    cands = run(world, g, group_policy="none", limit=1000)
    assert len(cands) == 1000
    assert [c.anchor for c in cands[:2]] == [1000, 2000]
    assert {c.anchor for c in cands[2:]} <= {1000, 2000}
    deep = run(world, g, group_policy="none", limit=1000, settings=Settings(strategy="depth-first"))
    assert {c.anchor for c in deep} == {1000}
    assert {c.key() for c in cands} <= {c.key() for c in run(world, g, group_policy="none")}


def test_hosts_first_in_every_order() -> None:
    world = wide_computes(5, 8, 8)
    g = [group(str(i), resources={"SRIOV_NET_VF": 1}) for i in range(1, 5)]
    for name in ("uuid", "random", "spread", "pack"):
        cands = run(world, g, group_policy="none", limit=7, settings=Settings(order=Order(name)))
        anchors = [c.anchor for c in cands]
        assert sorted(anchors[:5]) == [1000, 2000, 3000, 4000, 5000], name
        assert set(anchors[5:]) <= set(anchors[:5]), name


def test_hosts_first_without_a_limit_is_the_whole_answer_tree_by_tree() -> None:
    world = wide_computes(2, 3, 2)
    g = [group("1", resources={"SRIOV_NET_VF": 1}), group("2", resources={"SRIOV_NET_VF": 1})]
    cands = run(world, g, group_policy="none")
    deep = run(world, g, group_policy="none", settings=Settings(strategy="depth-first"))
    assert shape(cands) == shape(deep)
    anchors = [c.anchor for c in cands]
    assert anchors == sorted(anchors)
