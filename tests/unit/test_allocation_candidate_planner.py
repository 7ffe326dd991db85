"""The planner against the rule it implements, written out plainly: a tree
is worth visiting when every required-trait set and every member_of set
meets the labels of a provider that may serve it (one of its own, or a
sharing provider in an aggregate with one of its own)."""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from os_traits import MISC_SHARES_VIA_AGGREGATE as SHARING_TRAIT

from berth.domain.allocation_candidate import world_patch
from berth.domain.allocation_candidate.planner import Plan, Sets
from berth.domain.allocation_candidate.world import World
from support.candidate_worlds import AGGS, TRAITS, prov, worlds


def serving(world: World, root: int) -> list[int]:
    own = [p.id for p in world.providers.values() if p.root_id == root]
    own_aggs = set().union(*(world.providers[p].aggregates for p in own))
    return own + [
        p.id
        for p in world.providers.values()
        if SHARING_TRAIT in p.traits and p.root_id != root and p.aggregates & own_aggs
    ]


def viable(world: World, traits: Sets, aggs: Sets) -> list[int]:
    found = []
    for root in sorted(
        (p.id for p in world.providers.values() if p.root_id == p.id), key=world.uuid
    ):
        labels = [world.providers[p] for p in serving(world, root)]
        have_traits = set().union(*(p.traits for p in labels))
        have_aggs = set().union(*(p.aggregates for p in labels))
        if all(s & have_traits for s in traits) and all(s & have_aggs for s in aggs):
            found.append(root)
    return found


def shuffled_uuids(draw: Any, world: World) -> World:
    """``world`` with its uuids permuted, so that uuid order is not id
    order."""
    uuids = draw(st.permutations([p.uuid for p in world.providers.values()]))
    return World(
        dataclasses.replace(p, uuid=u) for p, u in zip(world.providers.values(), uuids, strict=True)
    )


def label_sets(names: list[str]) -> st.SearchStrategy[Sets]:
    return st.lists(st.frozensets(st.sampled_from(names), min_size=1), max_size=2).map(tuple)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), st.data())
def test_plan_is_the_rule_whichever_way_it_reads(world: World, data: Any) -> None:
    world = shuffled_uuids(data.draw, world)
    traits = data.draw(label_sets(TRAITS + [SHARING_TRAIT]))
    aggs = data.draw(label_sets(AGGS))
    expected = viable(world, traits, aggs)
    # switch 0: the index from the first root; 1: part way; else a walk.
    for switch in (0, 1, 2, len(world.providers) + 1):
        assert list(Plan(world, traits, aggs, switch)) == expected


def many_hosts(count: int) -> World:
    """Hosts in one of ten aggregates; a pool sharing the first one."""
    hosts = [
        prov(i, inv={"VCPU": 4}, traits=("T%d" % (i % 3),), aggs=("A%d" % (i % 10),))
        for i in range(1, count + 1)
    ]
    pool = prov(count + 1, inv={"DISK_GB": 100}, traits=(SHARING_TRAIT, "POOL"), aggs=("A0",))
    return World(hosts + [pool])


def test_a_rare_aggregate_switches_to_the_index() -> None:
    world = many_hosts(1000)
    rare = (frozenset(["A3"]),)
    plan = Plan(world, (), rare)
    assert list(plan) == viable(world, (), rare)
    assert len(plan) == 100
    # The pool serves the hosts of A0 (and itself): a trait only it has.
    pool = (frozenset(["POOL"]),)
    assert list(Plan(world, pool, ())) == viable(world, pool, ())


def test_the_plan_holds_what_the_search_took() -> None:
    world = many_hosts(50)
    plan = Plan(world, (frozenset(["T1"]),), ())
    first = iter(plan)
    taken = [next(first) for _ in range(3)]
    assert taken == [1, 4, 7] and len(plan) == 3
    # Iterating again gives the same trees, then the rest.
    assert list(plan) == viable(world, (frozenset(["T1"]),), ())
    assert len(plan) == 17


def test_a_set_nobody_carries_plans_nothing() -> None:
    world = many_hosts(20)
    assert list(Plan(world, (frozenset(["T9"]),), ())) == []
    assert list(Plan(world, (), ())) == world.roots


def test_refreshes_keep_the_tree_labels() -> None:
    world = World(
        [
            prov(1, inv={"VCPU": 4}, aggs=("A1",)),
            prov(2, root=1, parent=1, inv={"VF": 2}, traits=("NIC",)),
            prov(3, inv={"DISK_GB": 9}, traits=(SHARING_TRAIT,), aggs=("A1",)),
        ]
    )
    assert world.tree_labels(1) == (frozenset(["NIC", SHARING_TRAIT]), frozenset(["A1"]))
    used = world_patch.with_usage(world, {1: {"VCPU": 1}})
    moved = world_patch.with_providers(
        world, [dataclasses.replace(world.providers[2], used={"VF": 1})]
    )
    assert moved is not None
    for other in (used, moved):
        assert other.tree_traits is world.tree_traits
        assert other.tree_aggs is world.tree_aggs
