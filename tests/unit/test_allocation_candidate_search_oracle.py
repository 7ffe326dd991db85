"""Property tests: the search against a brute-force oracle
(``candidate_worlds``). Every candidate the search returns must be valid,
and none the oracle finds may be missing.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from berth.domain.allocation_candidate import world_patch
from berth.domain.allocation_candidate.engine import group_specs, plan, search
from berth.domain.allocation_candidate.offers import GroupSpec
from berth.domain.allocation_candidate.planner import Plan
from berth.domain.allocation_candidate.request import RequestGroup, RequestWide
from berth.domain.allocation_candidate.world import World
from support.candidate_worlds import oracle, queries, worlds


def check(world: World, query: tuple[list[RequestGroup], RequestWide]) -> None:
    groups, wide = query
    specs = group_specs(world, groups)
    if specs is None:
        # An in_tree naming no provider: nothing can match.
        assert not oracle(world, groups, wide)
        return
    found = search(world, specs, wide)
    keys = [c.key() for c in found]
    assert len(keys) == len(set(keys)), "repeated candidates"
    assert set(keys) == oracle(world, groups, wide)
    # The planner only skips trees that cannot serve: visiting just the
    # trees it picks gives the same answer, in the same order.
    planned = search(world, specs, wide, anchors=plan(world, groups))
    assert [c.key() for c in planned] == keys
    # So does it when it reads the name indexes from the first root on
    # (switch 0), switches part way, or only walks the roots.
    traits = tuple(r for g in groups for r in g.required)
    aggs = tuple(m for g in groups for m in g.member_of)
    for switch in (0, 1, len(world.providers) + 1):
        anchors = Plan(world, traits, aggs, switch)
        planned = search(world, specs, wide, anchors=anchors)
        assert [c.key() for c in planned] == keys
        assert set(anchors) <= set(world.roots)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), queries(), st.data())
def test_usage_refresh_equals_a_fresh_world(world: World, query: Any, data: Any) -> None:
    """A world with some providers' usage swapped in answers exactly as a
    world built from scratch with that usage."""
    groups, wide = query
    changed: dict[int, dict[str, int]] = {}
    for pid in data.draw(st.sets(st.sampled_from(sorted(world.providers)))):
        p = world.providers[pid]
        changed[pid] = {rc: data.draw(st.integers(0, 6)) for rc in p.inventories}
    fresh = World(
        [dataclasses.replace(p, used=changed.get(p.id, p.used)) for p in world.providers.values()]
    )
    specs = [GroupSpec(g) for g in groups]
    refreshed = world_patch.with_usage(world, changed)
    assert [c.key() for c in search(refreshed, specs, wide)] == [
        c.key() for c in search(fresh, specs, wide)
    ]
    # The original world is untouched (requests still using it see no
    # change).
    for pid in changed:
        assert world.providers[pid] is not refreshed.providers[pid]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), queries())
def test_search_matches_oracle(world: World, query: Any) -> None:
    check(world, query)


@pytest.mark.stress
@settings(max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), queries())
def test_search_matches_oracle_long(world: World, query: Any) -> None:
    check(world, query)
