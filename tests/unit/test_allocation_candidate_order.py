"""The orders (``order``): with ``limit=N`` the search returns, tree by
tree (depth-first), N of the best candidates of the whole answer, by the
score docs/allocation-candidates.md defines, and by default (hosts
first) the first candidate of each of the best trees before any tree's
second, in every order, checked against the brute-force
oracle (``candidate_worlds``) with the score worked out plainly
(``candidate_orders``); ``random`` gives valid candidates of the whole
answer, and ``uuid`` each tree first in uuid order. Rankings and their
scores: test_allocation_candidate_order_rankings.py; ties and random
draws: test_allocation_candidate_order_ties.py.
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from os_traits import MISC_SHARES_VIA_AGGREGATE as SHARING_TRAIT

from berth.domain.allocation_candidate import rankings
from berth.domain.allocation_candidate.engine import group_specs, plan, search
from berth.domain.allocation_candidate.planner import Plan
from berth.domain.allocation_candidate.request import Order, RequestGroup, RequestWide, Settings
from berth.domain.allocation_candidate.world import World
from support.candidate_orders import orders, plain_score
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
    ranked = (rankings.ranking(world, want), random.Random(seed))
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
