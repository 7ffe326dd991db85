"""The rankings of the scored orders (``rankings.Ranking``): spread puts
the emptiest tree first, pack the fullest, a discouraged trait sends a
tree to the back; a lone provider's score (``tree_score``'s fast path)
is the summed score and the documented one; a usage refresh keeps the
rankings those built anew, and a ranking made during a refresh is not
carried over stale.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from berth.domain.allocation_candidate import order, rankings, world_patch
from berth.domain.allocation_candidate.request import SCORED, Order
from berth.domain.allocation_candidate.world import World
from berth.domain.capacity import Inventory
from support.candidate_orders import orders, plain_score
from support.candidate_worlds import CLASSES, TRAITS, prov, worlds


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), orders, st.data())
def test_usage_refresh_keeps_rankings_exact(world: World, want: Order, data: Any) -> None:
    """A usage refresh re-ranks the trees it touched: the ranking it
    keeps is the one ranking the new world anew gives, copied or (in
    place) edited, and the old world's is unchanged."""
    kept = rankings.ranking(world, want)
    before = list(kept.keys)
    changed = {
        pid: {rc: data.draw(st.integers(0, 6)) for rc in world.providers[pid].inventories}
        for pid in data.draw(st.sets(st.sampled_from(sorted(world.providers))))
    }
    fresh = World(
        [dataclasses.replace(p, used=changed.get(p.id, p.used)) for p in world.providers.values()]
    )
    refreshed = world_patch.with_usage(world, changed)
    assert refreshed.rankings[want] == rankings.Ranking.build(fresh, want)
    assert kept.keys == before
    edited = world_patch.with_usage(world, changed, in_place=True)
    assert edited.rankings[want] is kept
    assert kept == rankings.Ranking.build(fresh, want)


def test_spread_pack_and_preferences() -> None:
    """Spread puts the emptiest tree (by share of capacity) first, pack
    the fullest; a discouraged trait sends a tree to the back."""
    world = World(
        [
            prov(1, inv={"VCPU": 10}, used={"VCPU": 9}),
            prov(2, inv={"VCPU": 100}, used={"VCPU": 50}),
            prov(3, inv={"VCPU": 4}, used={"VCPU": 0}, traits=("COMPUTE_STATUS_DISABLED",)),
        ]
    )

    def first(want: Order) -> list[int]:
        return list(rankings.Ranking.build(world, want).best_first(random.Random(0)))

    weights = (("VCPU", 1.0),)
    assert first(Order("spread", weights)) == [3, 2, 1]
    assert first(Order("pack", weights)) == [1, 2, 3]
    assert first(Order("spread", weights, (("COMPUTE_STATUS_DISABLED", -10.0),))) == [2, 1, 3]


def test_a_ranking_made_during_a_refresh_is_not_carried_over() -> None:
    """A request may rank the old world while a refresh makes the new
    one: that ranking, made after the refresh read the old keys, is left
    out of the new world (which ranks anew when asked), never carried
    over stale."""
    world = World([prov(i, inv={"VCPU": 4}) for i in (1, 2, 3)])
    spread, pack = Order("spread"), Order("pack")
    rankings.ranking(world, spread)
    was = rankings.before(world, {1})
    rankings.ranking(world, pack)
    fresh = World(
        [
            dataclasses.replace(p, used={"VCPU": 3} if p.id == 1 else p.used)
            for p in world.providers.values()
        ]
    )
    kept = rankings.reranked(world, fresh, was, in_place=False)
    assert list(kept) == [spread]
    assert kept[spread] == rankings.Ranking.build(fresh, spread)


LONE_SHAPES = [
    # several classes, some used
    (
        {"VCPU": 32, "MEMORY_MB": 131072, "DISK_GB": 1000},
        {"VCPU": 7, "MEMORY_MB": 50000, "DISK_GB": 999},
    ),
    # reserved and allocation ratios (capacity (total - reserved) * ratio)
    (
        {
            "VCPU": Inventory(total=16, reserved=4, allocation_ratio=4.0),
            "MEMORY_MB": Inventory(total=65536, reserved=2048, allocation_ratio=1.5),
            "DISK_GB": Inventory(total=500, reserved=100),
        },
        {"VCPU": 13, "MEMORY_MB": 4096, "DISK_GB": 0},
    ),
    # full, empty, and overcommitted (usage past a lowered capacity)
    (
        {"VCPU": 8, "MEMORY_MB": 1024, "DISK_GB": Inventory(total=100, allocation_ratio=0.5)},
        {"VCPU": 8, "MEMORY_MB": 0, "DISK_GB": 70},
    ),
    # a class reserved whole (no capacity: adds nothing), one class only
    ({"VCPU": Inventory(total=4, reserved=4)}, {"VCPU": 0}),
    ({"VF": 6}, {"VF": 5}),
]

LONE_ORDERS = [
    Order(name, weights, preferences)
    for name in SCORED
    for weights in (
        order.make_order(name).weights,
        (("DISK_GB", 0.5), ("VCPU", 2.0), ("VF", 1.0)),
        (("MEMORY_MB", 3.0),),
    )
    for preferences in ((), (("COMPUTE_STATUS_DISABLED", -10.0), ("T1", 0.5)))
]


@pytest.mark.parametrize("want", LONE_ORDERS, ids=repr)
def test_a_lone_providers_score_is_the_summed_score(want: Order) -> None:
    """``tree_score`` reads a tree of one provider off that provider and
    keeps the score on it; ``_summed_score`` sums any tree over its
    providers, class by class: for one-provider trees of every shape
    (several classes, reserved, allocation ratios, used, full, a class
    without capacity, classes the weights lack or name in vain, traits
    preferred and discouraged), in each order, both give the same score,
    and the kept one is the same again."""
    traits = [(), ("T1",), ("COMPUTE_STATUS_DISABLED", "T1")]
    world = World(
        [
            prov(i, inv=inv, used=used, traits=traits[i % 3])
            for i, (inv, used) in enumerate(LONE_SHAPES * 3, 1)
        ]
    )
    for root in world.roots:
        assert world.trees[root] == [root]
        fast = order.tree_score(world, root, want)
        assert fast == order._summed_score(world, root, want), root
        # Kept on the provider under the order's token, and found there.
        assert world.providers[root].score is None
        kept = order.token(want)
        assert order.tree_score(world, root, want, kept) == fast
        assert world.providers[root].score == complex(kept, fast)
        assert order.tree_score(world, root, want, kept) == fast
        # The documented score, worked out from the inventories alone.
        assert fast == plain_score(world, root, want)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(CLASSES),
        st.tuples(
            st.integers(1, 64),
            st.integers(0, 8),
            st.sampled_from([0.5, 1.0, 16.0]),
            st.integers(0, 80),
        ),
        min_size=1,
    ),
    st.sets(st.sampled_from(TRAITS)),
    orders,
)
def test_any_lone_providers_score_is_the_summed_score(
    classes: dict[str, tuple[int, int, float, int]], traits: set[str], want: Order
) -> None:
    """The same for any one provider: the fast path and the sum agree."""
    inv = {
        rc: Inventory(total=total, reserved=min(reserved, total), allocation_ratio=ratio)
        for rc, (total, reserved, ratio, _) in classes.items()
    }
    used = {rc: n for rc, (*_, n) in classes.items()}
    world = World([prov(1, inv=inv, used=used, traits=tuple(traits))])
    fast = order.tree_score(world, 1, want)
    assert fast == order._summed_score(world, 1, want)
