"""The orders (``order``): with ``limit=N`` the search returns, tree by
tree (depth-first), N of the best candidates of the whole answer, by the
score docs/allocation-candidates.md defines, and by default (hosts
first) the first candidate of each of the best trees before any tree's
second, in every order, checked against the brute-force
oracle (``candidate_worlds``) with the score worked out here plainly;
the rankings the cache's refreshes keep equal rankings made anew; and
``random`` gives valid candidates of the whole answer, every viable tree
first about as often as any other.
"""

from __future__ import annotations

import dataclasses
import random
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from os_traits import MISC_SHARES_VIA_AGGREGATE as SHARING_TRAIT

from berth.domain.allocation_candidate import draws, order, world_patch
from berth.domain.allocation_candidate.engine import group_specs, plan, search
from berth.domain.allocation_candidate.planner import Plan
from berth.domain.allocation_candidate.request import (
    SCORED,
    Order,
    RequestGroup,
    RequestWide,
    Settings,
)
from berth.domain.allocation_candidate.world import World
from berth.domain.capacity import Inventory
from support.candidate_worlds import (
    AGGS,
    CLASSES,
    TRAITS,
    Key,
    oracle,
    oracle_at,
    prov,
    queries,
    worlds,
)


def plain_score(world: World, root: int, want: Order) -> float:
    """The documented score of the tree rooted at ``root``, from its
    providers alone: per weighted class, the weight times the free
    (spread) or used (pack) share of the tree's capacity; plus the weight
    of each preferred trait some provider of the tree has."""
    tree = [p for p in world.providers.values() if p.root_id == root]
    score = 0.0
    for rc, weight in want.weights:
        cap = sum(p.inventories[rc].capacity for p in tree if rc in p.inventories)
        used = sum(p.used.get(rc, 0) for p in tree if rc in p.inventories)
        if cap > 0:
            share = used / cap if want.name == "pack" else (cap - used) / cap
            score += weight * share
    traits = set().union(*(p.traits for p in tree))
    score += sum(w for name, w in want.preferences if name in traits)
    return round(score, 9)


def scored_oracle(
    world: World, groups: list[RequestGroup], wide: RequestWide, want: Order
) -> dict[Key, float]:
    """Every valid candidate and its score: that of the tree it is built
    around, or, for one several trees can serve (sharing providers
    only), the best of theirs."""
    found: dict[Key, float] = {}
    for root in (p.id for p in world.providers.values() if p.parent_id is None):
        score = plain_score(world, root, want)
        for key in oracle_at(world, groups, wide, root):
            found[key] = max(score, found.get(key, score))
    return found


orders = st.builds(
    Order,
    st.sampled_from(SCORED),
    st.lists(
        st.tuples(st.sampled_from(CLASSES), st.sampled_from([0.5, 1.0, 2.0])),
        min_size=1,
        max_size=3,
        unique_by=lambda w: w[0],
    ).map(lambda ws: tuple(sorted(ws))),
    st.lists(
        st.tuples(st.sampled_from(TRAITS), st.sampled_from([-10.0, -1.0, 0.5, 3.0])),
        max_size=2,
        unique_by=lambda w: w[0],
    ).map(lambda ws: tuple(sorted(ws))),
)


@st.composite
def busy_worlds(draw: Any) -> World:
    """2-6 compute-node-like trees (a root with VCPU and DISK_GB, maybe
    children with VF), used in part, maybe a sharing DISK_GB provider:
    worlds whose answers span trees of different scores."""
    providers = []
    ids = iter(range(1, 100))

    def inv() -> dict[str, int]:
        return {
            rc: draw(st.integers(1, 8))
            for rc in draw(st.sets(st.sampled_from(CLASSES), min_size=1))
        }

    def make(root: int | None, parent: int | None, sharing: bool = False) -> int:
        pid = next(ids)
        totals = inv()
        traits = set(draw(st.sets(st.sampled_from(TRAITS))))
        if sharing:
            traits.add(SHARING_TRAIT)
        providers.append(
            prov(
                pid,
                root,
                parent,
                totals,
                {rc: draw(st.integers(0, n)) for rc, n in totals.items()},
                tuple(traits),
                tuple(draw(st.sets(st.sampled_from(AGGS)))),
            )
        )
        return pid

    for _ in range(draw(st.integers(2, 6))):
        root = make(None, None)
        for _ in range(draw(st.integers(0, 2))):
            make(root, root)
    if draw(st.booleans()):
        make(None, None, sharing=True)
    return World(providers)


@st.composite
def loose_queries(draw: Any) -> tuple[list[RequestGroup], RequestWide]:
    """``queries``, often without the aggregate, tree and root-trait
    limits (and sometimes without trait limits), so that answers span
    several trees of different scores."""
    groups, wide = draw(queries())
    if draw(st.booleans()):
        keep_traits = draw(st.booleans())
        groups = [
            dataclasses.replace(
                g,
                in_tree=None,
                member_of=(),
                forbidden_aggs=frozenset(),
                required=g.required if keep_traits else (),
                forbidden=g.forbidden if keep_traits else frozenset(),
            )
            for g in groups
        ]
        wide = dataclasses.replace(wide, root_required=frozenset())
    return groups, wide


def check(
    world: World, query: tuple[list[RequestGroup], RequestWide], want: Order, limit: int, seed: int
) -> None:
    groups, wide = query
    specs = group_specs(world, groups)
    if specs is None:
        return
    scores = scored_oracle(world, groups, wide, want)
    best = sorted(scores.values(), reverse=True)
    # The planner walks the ranking, or (switch 0) reads the name
    # indexes and sorts what they give; the search alone walks it all.
    traits = tuple(r for g in groups for r in g.required)
    aggs = tuple(m for g in groups for m in g.member_of)
    ranked = (order.ranking(world, want), random.Random(seed))
    for anchors in (
        plan(world, groups, want, random.Random(seed)),
        Plan(world, traits, aggs, 0, ranked),
        None,
    ):
        # Depth-first (tree by tree): the best of the whole answer.
        found = search(
            world,
            specs,
            dataclasses.replace(wide, limit=limit),
            Settings(order=want, memo=0, strategy="depth-first"),
            anchors=anchors,
        )
        keys = [c.key() for c in found]
        assert len(keys) == len(set(keys)), "repeated candidates"
        assert set(keys) <= scores.keys()
        got = [scores[k] for k in keys]
        # Best first, and the best of the whole answer.
        assert got == sorted(got, reverse=True)
        assert got == best[:limit]
        # Hosts first (the default): the best trees, one candidate each,
        # before a second candidate of any.
        found = search(
            world,
            specs,
            dataclasses.replace(wide, limit=limit),
            Settings(order=want, memo=0),
            anchors=anchors,
        )
        firsts, rest = check_hosts_first(world, groups, wide, found, limit)
        tree_scores = {
            root: plain_score(world, root, want)
            for root in trees_with_candidates(world, groups, wide)
        }
        got = [tree_scores[root] for root in firsts]
        assert got == sorted(got, reverse=True)
        # No tree left out scores above one let in.
        assert (
            all(
                score <= got[-1]
                for root, score in tree_scores.items()
                if root not in firsts and own_candidates(world, groups, wide, root)
            )
            if got
            else True
        )
        later = [tree_scores[c.anchor] for c in rest]
        assert later == sorted(later, reverse=True)


def trees_with_candidates(world: World, groups: list[RequestGroup], wide: RequestWide) -> list[int]:
    """The roots with at least one candidate in their tree, by the
    oracle."""
    return [
        p.id
        for p in world.providers.values()
        if p.parent_id is None and oracle_at(world, groups, wide, p.id)
    ]


def own_candidates(world: World, groups: list[RequestGroup], wide: RequestWide, root: int) -> bool:
    """True when some candidate of ``root``'s tree uses a provider of the
    tree that is not a sharing one (a candidate of sharing providers
    alone, even the tree's own, another tree may have given first)."""
    providers = world.providers
    return any(
        providers[p].root_id == root and SHARING_TRAIT not in providers[p].traits
        for key in oracle_at(world, groups, wide, root)
        for p, _, _ in key[0]
    )


def check_hosts_first(
    world: World, groups: list[RequestGroup], wide: RequestWide, found: list[Any], limit: int | None
) -> tuple[list[int], list[Any]]:
    """Checks the hosts-first rule on ``found`` (valid candidates of the
    whole answer, none twice, as many as ``limit`` allows; every tree's
    first before any tree's second; when a tree comes twice, every tree
    with a candidate of its own is there) and returns the trees in the
    order of their first candidates, and the candidates after them."""
    whole = oracle(world, groups, wide)
    keys = [c.key() for c in found]
    assert len(keys) == len(set(keys)), "repeated candidates"
    assert set(keys) <= whole
    assert len(keys) == (len(whole) if limit is None else min(limit, len(whole)))
    for cand in found:
        assert cand.key() in oracle_at(world, groups, wide, cand.anchor)
    firsts: list[int] = []
    for cand in found:
        if cand.anchor in firsts:
            break
        firsts.append(cand.anchor)
    rest = found[len(firsts) :]
    assert all(c.anchor in firsts for c in rest), "a tree's first came late"
    if rest:
        assert {
            r
            for r in trees_with_candidates(world, groups, wide)
            if own_candidates(world, groups, wide, r)
        } <= set(firsts)
    return firsts, rest


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(worlds(trees=6), busy_worlds()),
    loose_queries(),
    orders,
    st.integers(1, 6),
    st.integers(0, 99),
)
def test_limit_returns_the_best_by_score(
    world: World, query: Any, want: Order, limit: int, seed: int
) -> None:
    check(world, query, want, limit, seed)


@pytest.mark.stress
@settings(max_examples=2000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(worlds(trees=6), busy_worlds()),
    loose_queries(),
    orders,
    st.integers(1, 6),
    st.integers(0, 99),
)
def test_limit_returns_the_best_by_score_long(
    world: World, query: Any, want: Order, limit: int, seed: int
) -> None:
    check(world, query, want, limit, seed)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(worlds(), orders, st.data())
def test_usage_refresh_keeps_rankings_exact(world: World, want: Order, data: Any) -> None:
    """A usage refresh re-ranks the trees it touched: the ranking it
    keeps is the one ranking the new world anew gives, copied or (in
    place) edited, and the old world's is unchanged."""
    kept = order.ranking(world, want)
    before = list(kept.keys)
    changed = {
        pid: {rc: data.draw(st.integers(0, 6)) for rc in world.providers[pid].inventories}
        for pid in data.draw(st.sets(st.sampled_from(sorted(world.providers))))
    }
    fresh = World(
        [dataclasses.replace(p, used=changed.get(p.id, p.used)) for p in world.providers.values()]
    )
    refreshed = world_patch.with_usage(world, changed)
    assert refreshed.rankings[want] == order.Ranking.build(fresh, want)
    assert kept.keys == before
    edited = world_patch.with_usage(world, changed, in_place=True)
    assert edited.rankings[want] is kept
    assert kept == order.Ranking.build(fresh, want)


def test_ties_come_in_another_order_per_request() -> None:
    """Equal trees are drawn in a random order for each request, so
    concurrent schedulers do not all take the same first tree; every
    tree still comes exactly once."""
    world = World([prov(i, inv={"VCPU": 4}) for i in range(1, 41)])
    ranked = order.ranking(world, Order("spread"))
    firsts = set()
    for seed in range(20):
        walk = list(ranked.best_first(random.Random(seed)))
        assert sorted(walk) == sorted(world.roots)
        firsts.add(walk[0])
    assert len(firsts) > 5


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
        return list(order.Ranking.build(world, want).best_first(random.Random(0)))

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
    order.ranking(world, spread)
    was = order.before(world, {1})
    order.ranking(world, pack)
    fresh = World(
        [
            dataclasses.replace(p, used={"VCPU": 3} if p.id == 1 else p.used)
            for p in world.providers.values()
        ]
    )
    kept = order.reranked(world, fresh, was, in_place=False)
    assert list(kept) == [spread]
    assert kept[spread] == order.Ranking.build(fresh, spread)


def check_random(
    world: World, query: tuple[list[RequestGroup], RequestWide], limit: int | None, seed: int
) -> None:
    groups, wide = query
    specs = group_specs(world, groups)
    if specs is None:
        return
    whole = oracle(world, groups, wide)
    want = Order("random")
    traits = tuple(r for g in groups for r in g.required)
    aggs = tuple(m for g in groups for m in g.member_of)
    # The planner as the engine runs it, then forced down the name index
    # (switch 0) and down the shuffled walk; then the search alone.
    for anchors in (
        plan(world, groups, want, random.Random(seed)),
        Plan(world, traits, aggs, 0, shuffle=random.Random(seed)),
        Plan(world, traits, aggs, 10**9, shuffle=random.Random(seed)),
        None,
    ):
        for memo in (0, 20_000):
            found = search(
                world,
                specs,
                dataclasses.replace(wide, limit=limit),
                Settings(order=want, memo=memo),
                anchors=anchors,
                rng=random.Random(seed),
            )
            if limit is None:
                keys = [c.key() for c in found]
                assert len(keys) == len(set(keys)), "repeated candidates"
                assert set(keys) == whole
            else:
                check_hosts_first(world, groups, wide, found, limit)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.one_of(worlds(trees=6), busy_worlds()),
    loose_queries(),
    st.one_of(st.none(), st.integers(1, 6)),
    st.integers(0, 99),
)
def test_random_gives_valid_candidates_of_the_whole_answer(
    world: World, query: Any, limit: int | None, seed: int
) -> None:
    """``random`` with ``limit=N`` gives min(N, all) valid candidates of
    the whole answer, none twice; without a limit, the whole answer."""
    check_random(world, query, limit, seed)


def check_uuid(world: World, query: tuple[list[RequestGroup], RequestWide], limit: int) -> None:
    groups, wide = query
    specs = group_specs(world, groups)
    if specs is None:
        return
    for memo in (0, 20_000):
        found = search(
            world,
            specs,
            dataclasses.replace(wide, limit=limit),
            Settings(memo=memo),
            anchors=plan(world, groups, Order()),
        )
        firsts, _ = check_hosts_first(world, groups, wide, found, limit)
        uuids = [world.uuid(root) for root in firsts]
        assert uuids == sorted(uuids)
        # No tree left out comes before one let in.
        assert not uuids or all(
            world.uuid(root) > uuids[-1]
            for root in trees_with_candidates(world, groups, wide)
            if root not in firsts and own_candidates(world, groups, wide, root)
        )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(worlds(trees=6), busy_worlds()), loose_queries(), st.integers(1, 6))
def test_uuid_with_a_limit_gives_each_tree_first_in_uuid_order(
    world: World, query: Any, limit: int
) -> None:
    """``uuid`` with ``limit=N``: the first candidate of each tree, trees
    in uuid order, before any tree's second."""
    check_uuid(world, query, limit)


def first_trees(world: World, groups: list[RequestGroup], runs: int) -> dict[int, int]:
    """How often each tree comes first in ``runs`` requests in the
    ``random`` order with ``limit=1``."""
    specs = group_specs(world, groups)
    assert specs is not None
    counts: dict[int, int] = {}
    for seed in range(runs):
        rng = random.Random(seed)
        found = search(
            world,
            specs,
            RequestWide(limit=1),
            Settings(order=Order("random")),
            anchors=plan(world, groups, Order("random"), rng),
            rng=rng,
        )
        root = world.providers[next(iter(found[0].allocs))].root_id
        counts[root] = counts.get(root, 0) + 1
    return counts


@pytest.mark.parametrize("required", [(), (frozenset(["T1"]),)])
def test_random_puts_every_viable_tree_first_equally_often(
    required: tuple[frozenset[str], ...],
) -> None:
    """Over many requests each of the 20 trees that can serve comes first
    about equally often (chi-square, 19 degrees of freedom, under 43.8,
    which a uniform draw exceeds once in a thousand; seeded), whether the
    planner walks a shuffle of the roots (no trait) or reads the name
    index (T1: 20 of 100 trees); the 80 others never come first."""
    # Trees 1-20 can serve; 21-60 lack VCPU; 61-100 have VCPU but not T1
    # (and, with no trait required, too little of it).
    world = World(
        [prov(i, inv={"VCPU": 4}, traits=("T1",)) for i in range(1, 21)]
        + [prov(i, inv={"DISK_GB": 4}, traits=("T2",)) for i in range(21, 61)]
        + [prov(i, inv={"VCPU": 4}, used={"VCPU": 4}) for i in range(61, 101)]
    )
    runs = 2000
    counts = first_trees(world, [RequestGroup("", {"VCPU": 1}, required=required)], runs)
    assert set(counts) <= set(range(1, 21))
    expected = runs / 20
    chi2 = sum((counts.get(r, 0) - expected) ** 2 / expected for r in range(1, 21))
    assert chi2 < 43.8, counts


def test_random_shuffles_a_trees_candidates() -> None:
    """A tree's candidates come in a random order too: with four
    children that can each serve, each comes first in some requests."""
    world = World([prov(1, inv={"VCPU": 4})] + [prov(i, 1, 1, inv={"VF": 2}) for i in range(2, 6)])
    groups = [RequestGroup("", {"VF": 1})]
    specs = group_specs(world, groups)
    assert specs is not None
    firsts = set()
    for seed in range(40):
        found = search(
            world,
            specs,
            RequestWide(limit=1),
            Settings(order=Order("random")),
            rng=random.Random(seed),
        )
        firsts |= found[0].allocs.keys()
    assert firsts == {2, 3, 4, 5}


def test_a_run_of_ties_and_a_shuffle_come_in_every_order_alike() -> None:
    """The lazy draws (by rejection, then Fisher-Yates) give each order
    of a run of equal scores, and of ``shuffled``'s numbers, equally
    often (seeded; chi-square under the 0.1% bound: 119 degrees of
    freedom under 173.6, 23 under 49.7), and keep the run in its place."""
    ranked = order.Ranking(
        order.make_order("spread"), [(-1.0, 9)] + [(-0.5, i) for i in range(5)] + [(0.0, 7)]
    )
    rng = random.Random(4)
    walks = Counter(tuple(ranked.best_first(rng)) for _ in range(24_000))
    assert all(w[0] == 9 and w[-1] == 7 for w in walks) and len(walks) == 120
    expected = 24_000 / 120
    assert sum((n - expected) ** 2 / expected for n in walks.values()) < 173.6
    drawn = Counter(tuple(draws.shuffled(range(3, 7), rng)) for _ in range(12_000))
    assert len(drawn) == 24 and all(sorted(d) == [3, 4, 5, 6] for d in drawn)
    expected = 12_000 / 24
    assert sum((n - expected) ** 2 / expected for n in drawn.values()) < 49.7


def runs_world() -> World:
    """Runs of ties of several lengths among trees of distinct scores:
    VCPU 20 each, trees 1-3 alone (used 1, 2, 3), 4-8 a run of five
    (used 5), 9 alone (used 6), 10-49 a run of forty (used 10), 50-51 a
    run of two (used 12)."""
    used = {1: 1, 2: 2, 3: 3, 9: 6, 50: 12, 51: 12}
    used.update((i, 5) for i in range(4, 9))
    used.update((i, 10) for i in range(10, 50))
    return World([prov(i, inv={"VCPU": 20}, used={"VCPU": n}) for i, n in sorted(used.items())])


RUNS = [[1], [2], [3], list(range(4, 9)), [9], list(range(10, 50)), [50, 51]]


def test_a_walk_shuffles_each_run_of_ties_in_its_place() -> None:
    """``best_first`` gives every root once, runs of ties (short ones
    shuffled whole, long ones drawn as read) each a permutation of the
    run in the run's place, whichever random source draws them."""
    ranked = order.Ranking.build(runs_world(), Order("pack"))
    assert ranked.roots == [r for run in reversed(RUNS) for r in run]
    for seed in range(30):
        walk = list(ranked.best_first(random.Random(seed)))
        at = 0
        for run in reversed(RUNS):
            assert sorted(walk[at : at + len(run)]) == run
            at += len(run)
        assert at == len(walk)


def test_requests_draw_ties_apart() -> None:
    """Requests sharing the process's source (``order.SOURCE``) each draw
    their own order of every run of ties: the short run's first tree
    and the long run's first few differ between requests."""
    ranked = order.Ranking.build(runs_world(), Order("spread"))
    short, long_ = set(), set()
    for _ in range(30):
        walk = list(ranked.best_first(order.SOURCE))
        short.add(walk[3])
        long_.add(tuple(walk[9:14]))
    assert short == set(range(4, 9))
    assert len(long_) == 30


def test_claims_keep_the_runs_of_ties_exact() -> None:
    """Claims that move trees into, out of and along runs of ties (in
    place, as ``berth serve``'s workers refresh) leave the ranking's
    roots, scores and ties those of a ranking built anew."""
    rng = random.Random(5)
    # Two sizes, so that a tree often moves to a score no other has,
    # just before or after a run.
    size = {i: 4 + i % 2 for i in range(1, 41)}
    world = World(
        [prov(i, inv={"VCPU": size[i]}, used={"VCPU": rng.randint(0, 2)}) for i in range(1, 41)]
    )
    for want in (Order("spread"), Order("pack")):
        kept = order.ranking(world, want)
        for _ in range(300):
            pid = rng.randint(1, 40)
            world = world_patch.with_usage(
                world, {pid: {"VCPU": rng.randint(0, size[pid])}}, in_place=True
            )
            assert world.rankings[want] is kept
            assert kept == order.Ranking.build(world, want)
            assert kept.roots == [r for _, r in sorted(kept.keys)]


def test_a_long_run_starts_with_a_fair_draw_then_walks_round() -> None:
    """A run of ties longer than ``order.LONG`` (here spread's 200 empty
    trees after two fuller ones): every root once, the run in its place;
    its first ``draws.FIRST`` roots drawn at random, each root of the run
    first about equally often (seeded; chi-square, 199 degrees of
    freedom, under 266.3, the 0.1% bound); the rest of the run in its
    own order from a random place, round, those drawn already left out."""
    world = World(
        [prov(i, inv={"VCPU": 4}, used={"VCPU": 2 if i > 200 else 0}) for i in range(1, 203)]
    )
    ranked = order.ranking(world, Order("spread"))
    run = ranked.roots[:200]
    assert sorted(run) == list(range(1, 201)) and order.LONG < 200
    rng = random.Random(6)
    firsts: Counter[int] = Counter()
    starts = set()
    for _ in range(8_000):
        walk = list(ranked.best_first(rng))
        assert sorted(walk[:200]) == run and sorted(walk[200:]) == [201, 202]
        firsts[walk[0]] += 1
        drawn = set(walk[: draws.FIRST])
        rest = [r for r in run if r not in drawn]
        at = rest.index(walk[draws.FIRST])
        assert walk[draws.FIRST : 200] == rest[at:] + rest[:at]
        starts.add(walk[draws.FIRST])
    assert len(starts) > 100
    expected = 8_000 / 200
    assert sum((firsts[r] - expected) ** 2 / expected for r in run) < 266.3


def test_random_walks_on_round_the_roots_after_a_fair_draw() -> None:
    """In the ``random`` order the planner draws the first ``FIRST``
    roots at random, then walks the others in uuid order from a random
    root, round, none twice (sets of requests are the random draw plus a
    stretch of the uuid order, not independent samples)."""
    world = World([prov(i, inv={"VCPU": 4}) for i in range(1, 101)])
    group = [RequestGroup("", {"VCPU": 1})]
    starts = set()
    for seed in range(30):
        walk = list(plan(world, group, Order("random"), random.Random(seed)))
        assert sorted(walk) == sorted(world.roots)
        drawn = set(walk[: draws.FIRST])
        rest = [r for r in world.roots if r not in drawn]
        at = rest.index(walk[draws.FIRST])
        assert walk[draws.FIRST :] == rest[at:] + rest[:at]
        starts.add(walk[draws.FIRST])
    assert len(starts) > 15


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


def test_a_run_of_a_dozen_comes_in_any_order() -> None:
    """A run of ties longer than ``draws.TABLED`` is sorted by random
    keys: a permutation of it, each root first about equally often
    (seeded; chi-square, 11 degrees of freedom, under 31.3, the 0.1%
    bound)."""
    rng = random.Random(8)
    firsts: Counter[int] = Counter()
    for _ in range(6_000):
        run = list(draws.mixed(list(range(12)), rng))
        assert sorted(run) == list(range(12))
        firsts[run[0]] += 1
    assert sum((firsts[r] - 500) ** 2 / 500 for r in range(12)) < 31.3
