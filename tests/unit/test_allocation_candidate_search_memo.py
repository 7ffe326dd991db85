"""The search's memo of each anchor's candidates (``AnchorMemo``).

A world keeps, per request shape, the candidates each anchor gave, and
gives them again while every provider they came from is the same object.
These tests check that a memo never answers differently from a world
searched afresh: after usage and inventory refreshes, after a search that
``limit`` cut short, and when the budget forces entries out.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from berth.domain.allocation_candidate import world_patch
from berth.domain.allocation_candidate.anchor_memo import AnchorMemo
from berth.domain.allocation_candidate.engine import search
from berth.domain.allocation_candidate.offers import GroupSpec
from berth.domain.allocation_candidate.request import RequestGroup, RequestWide, Settings
from berth.domain.allocation_candidate.world import World
from berth.domain.capacity import Inventory
from support.candidate_worlds import oracle, prov, queries, worlds


def keys(world: World, groups: list[RequestGroup], wide: RequestWide) -> list[Any]:
    return [c.key() for c in search(world, [GroupSpec(g) for g in groups], wide)]


def memo_of(world: World) -> AnchorMemo:
    found = world.memo[AnchorMemo]
    assert isinstance(found, AnchorMemo)
    return found


def hosts(n: int, vcpus: int = 4) -> World:
    """``n`` trees of one provider each (kept on the provider)."""
    return World([prov(i, inv={"VCPU": vcpus, "MEMORY_MB": 1024}) for i in range(1, n + 1)])


def nested(n: int, vcpus: int = 4) -> World:
    """``n`` trees of two providers, VCPU on the child (root ``i``,
    child ``100 + i``: kept in the shape's map)."""
    return World(
        [
            p
            for i in range(1, n + 1)
            for p in (
                prov(i, inv={"MEMORY_MB": 1024}),
                prov(100 + i, root=i, parent=i, inv={"VCPU": vcpus}),
            )
        ]
    )


VCPU2 = [RequestGroup(resources={"VCPU": 2})]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), queries(), st.data())
def test_a_refreshed_world_with_a_warm_memo_answers_as_a_fresh_one(
    world: World, query: Any, data: Any
) -> None:
    """Search (warming the memo, maybe cut short by a limit), change some
    providers' usage or inventory, search again: the same answer, in the
    same order, as a world built from scratch, and as the oracle."""
    groups, wide = query
    first = data.draw(st.sampled_from([None, 1, 2]))
    keys(world, groups, dataclasses.replace(wide, limit=first))
    keys(world, groups, wide)
    changed: dict[int, dict[str, int]] = {}
    for pid in data.draw(st.sets(st.sampled_from(sorted(world.providers)))):
        p = world.providers[pid]
        changed[pid] = {rc: data.draw(st.integers(0, 6)) for rc in p.inventories}
    refreshed = world_patch.with_usage(world, changed)
    # Amount-only inventory changes keep the indexes (and so the memo).
    grown = [
        dataclasses.replace(
            p,
            inventories={
                rc: inv._replace(total=inv.total + 1) for rc, inv in p.inventories.items()
            },
        )
        for pid, p in refreshed.providers.items()
        if data.draw(st.booleans(), label="grow %d" % pid)
    ]
    amended = world_patch.with_providers(refreshed, grown)
    assert amended is not None
    assert amended.memo is world.memo
    fresh = World([dataclasses.replace(p) for p in amended.providers.values()])
    expected = keys(fresh, groups, wide)
    assert keys(amended, groups, wide) == expected
    # Twice: the second answer comes from the memo the first one filled.
    assert keys(amended, groups, wide) == expected
    if all(g.in_tree is None for g in groups):
        assert set(expected) == oracle(fresh, groups, wide)


def test_a_claim_makes_only_its_tree_be_searched_again() -> None:
    world = nested(3)
    assert len(keys(world, VCPU2, RequestWide())) == 3
    memo = memo_of(world)
    assert memo.held == 3
    entries = next(iter(memo._shapes.values()))
    before = {a: e[1] for a, e in entries.items()}
    full = world_patch.with_usage(world, {102: {"VCPU": 4}})
    found = search(full, [GroupSpec(VCPU2[0])], RequestWide())
    assert [c.anchor for c in found] == [1, 3]
    # Hosts 1 and 3 came from the memo (the very candidate objects kept).
    assert found[0] is before[1][0] and found[1] is before[3][0]
    assert entries[2][1] == [] and memo.held == 2
    # The world searched before the claim still answers as it did.
    assert [c.anchor for c in search(world, [GroupSpec(VCPU2[0])], RequestWide())] == [1, 2, 3]


def test_an_anchor_cut_short_by_limit_is_not_kept() -> None:
    # Host 1 gives three candidates (VCPU from any of its three children).
    world = World(
        [
            prov(1, inv={"MEMORY_MB": 1024}),
            prov(2, root=1, parent=1, inv={"VCPU": 4}),
            prov(3, root=1, parent=1, inv={"VCPU": 4}),
            prov(4, root=1, parent=1, inv={"VCPU": 4}),
            prov(5, inv={"VCPU": 4, "MEMORY_MB": 1024}),
        ]
    )
    groups = [RequestGroup(resources={"VCPU": 1, "MEMORY_MB": 1})]
    assert len(keys(world, groups, RequestWide(limit=2))) == 2
    assert memo_of(world).held == 0
    assert len(keys(world, groups, RequestWide())) == 4
    # Host 5, a tree of its own, is kept on its provider.
    assert memo_of(world).held == 3
    assert world.providers[5].kept is not None
    assert len(keys(world, groups, RequestWide(limit=2))) == 2


def test_a_lone_tree_is_kept_on_its_provider() -> None:
    """Outside the budget, for the first shape to ask; a claim replaces
    the provider, and with it the entry."""
    world = hosts(3)
    memo = world.memo[AnchorMemo] = AnchorMemo(budget=2)
    spec = [GroupSpec(VCPU2[0])]
    assert len(search(world, spec, RequestWide())) == 3
    assert memo.held == 0
    kept = {pid: p.kept for pid, p in world.providers.items()}
    assert all(k is not None and len(k) == 2 for k in kept.values())
    full = world_patch.with_usage(world, {2: {"VCPU": 4}})
    found = search(full, spec, RequestWide())
    assert [c.anchor for c in found] == [1, 3]
    # The very candidate objects kept; host 2 (a new object) kept anew.
    assert found[0] is kept[1][1] and found[1] is kept[3][1]
    # (Full: kept as a tree with no candidate.)
    assert full.providers[2].kept == (kept[1][0],)
    assert [c.anchor for c in search(world, spec, RequestWide())] == [1, 2, 3]
    # A second shape while the first lives: in its map, under budget.
    assert len(keys(full, [RequestGroup(resources={"VCPU": 1})], RequestWide())) == 2
    assert memo.held == 2
    assert len(keys(full, VCPU2, RequestWide())) == 2


def test_the_kept_candidates_of_a_shape_share_their_amounts() -> None:
    """Hosts kept for one shape name one ``{class: amount}`` dict per
    distinct amounts (in the order the candidate lists them), in the
    shape's map as on providers; the answer is the same."""
    world = World(
        [prov(i, inv={"VCPU": 4, "MEMORY_MB": 1024}) for i in (1, 2, 3)]
        + [
            p
            for i in (4, 5)
            for p in (
                prov(i, inv={"MEMORY_MB": 1024}),
                prov(100 + i, root=i, parent=i, inv={"VCPU": 4}),
            )
        ]
    )
    world.memo[AnchorMemo] = AnchorMemo()
    group = [RequestGroup(resources={"VCPU": 2, "MEMORY_MB": 512})]
    fresh = keys(world, group, RequestWide())
    assert keys(world, group, RequestWide()) == fresh
    lone = [world.providers[i].kept[1].allocs[i] for i in (1, 2, 3)]
    assert lone[0] == {"VCPU": 2, "MEMORY_MB": 512}
    assert list(lone[0]) == ["MEMORY_MB", "VCPU"]
    assert lone[0] is lone[1] is lone[2]
    # Nested trees: each provider takes one class, one dict per class.
    (shape,) = memo_of(world)._shapes.values()
    mems = [shape[i][1][0].allocs[i] for i in (4, 5)]
    assert mems[0] == {"MEMORY_MB": 512} and mems[0] is mems[1]


def test_a_lone_entry_of_a_dropped_shape_or_another_memo_is_stale() -> None:
    world = hosts(2)
    memo = world.memo[AnchorMemo] = AnchorMemo(shapes=1)
    one = [RequestGroup(resources={"VCPU": 1})]
    keys(world, VCPU2, RequestWide())
    first = world.providers[1].kept
    assert first is not None
    # The first shape is dropped: the second takes the providers.
    assert len(keys(world, one, RequestWide())) == 2
    assert world.providers[1].kept is not first and memo.held == 0
    assert not first[0].live and not first[0]
    # A rebuilt world shares the provider objects, not the memo.
    rebuilt = World(list(world.providers.values()))
    assert len(keys(rebuilt, VCPU2, RequestWide())) == 2
    assert memo_of(rebuilt).held == 0
    assert world.providers[1].kept[0] is not first[0]


def test_the_budget_is_kept_and_the_oldest_shape_goes_first() -> None:
    world = nested(10)
    memo = world.memo[AnchorMemo] = AnchorMemo(budget=15, shapes=3)
    one = [RequestGroup(resources={"VCPU": 1})]
    two = [RequestGroup(resources={"VCPU": 2})]
    assert len(keys(world, one, RequestWide())) == 10
    assert memo.held == 10
    # The second shape needs the room the first one holds.
    assert len(keys(world, two, RequestWide())) == 10
    assert memo.held == 10
    assert len(memo._shapes) == 1
    for n in (1, 2, 3):
        keys(world, [RequestGroup(resources={"MEMORY_MB": n})], RequestWide(limit=1))
    assert len(memo._shapes) == 3
    assert memo.held <= 15
    # Whatever was dropped, answers stay right.
    assert len(keys(world, one, RequestWide())) == 10


def test_an_exploding_anchor_is_searched_lazily_and_not_kept() -> None:
    # 20 children with one VF each, three groups of one VF: 6,840 ways.
    children = [prov(i, root=1, parent=1, inv={"VF": 1}) for i in range(2, 22)]
    world = World([prov(1, inv={"VCPU": 4}), *children])
    groups = [RequestGroup(suffix=s, resources={"VF": 1}) for s in "123"]
    wide = RequestWide(limit=5, group_policy="none")
    assert len(keys(world, groups, wide)) == 5
    found = keys(world, groups, RequestWide(group_policy="none"))
    assert len(found) == 20 * 19 * 18
    assert memo_of(world).held == 0
    assert AnchorMemo.PER_ANCHOR < len(found)


def test_a_rebuilt_world_starts_with_an_empty_memo() -> None:
    world = hosts(2)
    keys(world, VCPU2, RequestWide())
    moved = dataclasses.replace(
        world.providers[2], inventories={"VCPU": Inventory(4), "DISK_GB": Inventory(10)}
    )
    assert world_patch.with_providers(world, [moved]) is None  # indexes must be rebuilt
    rebuilt = World([world.providers[1], moved])
    assert AnchorMemo not in rebuilt.memo
    assert len(keys(rebuilt, VCPU2, RequestWide())) == 2


def test_a_memo_of_zero_keeps_nothing() -> None:
    world = hosts(3)
    found = search(world, [GroupSpec(VCPU2[0])], RequestWide(), Settings(memo=0))
    assert len(found) == 3
    assert AnchorMemo not in world.memo
    assert not any(c.kept for c in found)
