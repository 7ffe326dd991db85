"""Fit, checked on random worlds: claiming the first candidate again and
again (with the brute-force oracle agreeing at every step) makes exactly
the greedy count fit reports, per tree and per aggregate; no order of
claims (searched exhaustively on these small worlds) beats the upper
bound, and where fit says exact, none beats the greedy count either."""

from __future__ import annotations

import dataclasses
from collections import Counter
from functools import cache

import pytest
from hypothesis import HealthCheck, assume, given, settings

from berth.domain.allocation_candidate.engine import group_specs, search
from berth.domain.allocation_candidate.fit import fit
from berth.domain.allocation_candidate.offers import GroupSpec
from berth.domain.allocation_candidate.request import RequestGroup, RequestWide
from berth.domain.allocation_candidate.world import World
from berth.domain.capacity import Inventory
from support.candidate_worlds import group, oracle, prov, queries, worlds

Query = tuple[list[RequestGroup], RequestWide]
Alloc = tuple[tuple[int, str, int], ...]


def _claimed(world: World, allocs: Alloc) -> World:
    used = {p.id: dict(p.used) for p in world.providers.values()}
    for pid, rc, n in allocs:
        used[pid][rc] = used[pid].get(rc, 0) + n
    return World([dataclasses.replace(p, used=used[p.id]) for p in world.providers.values()])


def claim_first_until_none(world: World, query: Query) -> tuple[int, Counter[int], Counter[str]]:
    groups, wide = query
    specs = group_specs(world, groups) or []
    trees: Counter[int] = Counter()
    aggs: Counter[str] = Counter()
    while True:
        found = search(world, specs, wide) if specs else []
        assert {c.key() for c in found} == oracle(world, groups, wide)
        if not found:
            return sum(trees.values()), trees, aggs
        first = found[0]
        trees[first.anchor] += 1
        labels = set(world.providers[first.anchor].aggregates)
        for pid in first.allocs:
            labels |= world.providers[pid].aggregates
        aggs.update(labels)
        world = _claimed(world, first.key()[0])


def most_claims(world: World, query: Query, states: int = 3000) -> int | None:
    """The most claims any order of claiming valid candidates makes (None
    when the search would visit more than ``states`` usage states)."""
    groups, wide = query
    base = world
    seen: dict[tuple[object, ...], int] = {}

    @cache
    def best(usage: tuple[tuple[int, str, int], ...]) -> int:
        if len(seen) > states:
            raise OverflowError
        seen[usage] = 0
        now = _claimed(base, usage)
        keys = oracle(now, groups, wide)
        return max((1 + best(_merge(usage, key[0])) for key in keys), default=0)

    try:
        return best(())
    except OverflowError:
        return None


def _merge(usage: Alloc, allocs: Alloc) -> Alloc:
    totals: Counter[tuple[int, str]] = Counter()
    for pid, rc, n in usage + allocs:
        totals[(pid, rc)] += n
    return tuple(sorted((p, rc, n) for (p, rc), n in totals.items()))


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(worlds(most=8), queries())
def test_fit_matches_claims(world: World, query: Query) -> None:
    check(world, query)


@pytest.mark.stress
@settings(
    max_examples=500,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(worlds(most=8), queries())
def test_fit_matches_claims_long(world: World, query: Query) -> None:
    check(world, query)


def check(world: World, query: Query) -> None:
    groups, wide = query
    answer = fit(world, group_specs(world, groups), wide)
    # Most random queries fit nowhere; those teach little here.
    assume(answer.total.bound > 0)
    made, trees, aggs = claim_first_until_none(world, query)
    assert answer.complete
    assert answer.total.placed == made
    assert made <= answer.total.bound
    assert {r: c.placed for r, c in answer.trees.items() if c.placed} == dict(trees)
    assert all(c.placed <= c.bound for c in answer.trees.values())
    assert {a: c.placed for a, c in answer.aggregates.items() if c.placed} == dict(aggs)
    assert all(c.placed <= c.bound for c in answer.aggregates.values())
    best = most_claims(world, query)
    assume(best is not None)
    assert made <= best <= answer.total.bound
    if answer.total.exact:
        assert best == made


def test_lone_hosts_are_exact() -> None:
    world = World(
        [
            prov(
                1,
                inv={
                    "VCPU": Inventory(total=8, reserved=1, allocation_ratio=2.0),
                    "MEMORY_MB": 4096,
                },
                used={"VCPU": 3},
            ),
            prov(2, inv={"VCPU": 4, "MEMORY_MB": 1024}),
        ]
    )
    g = group(resources={"VCPU": 2, "MEMORY_MB": 512})
    answer = fit(world, [GroupSpec(g)], RequestWide())
    # Host 1: 11 VCPU free -> 5; 4096 MB -> 8. Host 2: 2 VCPU, 2 x 512.
    assert [(c.placed, c.bound) for c in answer.trees.values()] == [(5, 5), (2, 2)]
    assert answer.total.placed == answer.total.bound == 7


def test_search_cap_reports_incomplete() -> None:
    world = World([prov(n, inv={"VCPU": 10}) for n in (1, 2, 3)])
    g = group(resources={"VCPU": 1})
    answer = fit(world, [GroupSpec(g)], RequestWide(), max_steps=2)
    assert not answer.complete
    assert (answer.total.placed, answer.total.bound) == (20, 30)
    assert fit(world, [GroupSpec(g)], RequestWide(), max_steps=3).complete
