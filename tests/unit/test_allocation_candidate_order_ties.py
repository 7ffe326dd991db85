"""Ties and random draws in the orders (``order``, ``draws``): equal
trees come in another order per request, each run of ties a permutation
in its place, drawn about equally often (chi-square, seeded); claims
keep the runs exact; a long run starts with a fair draw then walks
round; ``random`` puts every viable tree first about equally often and
shuffles a tree's candidates too.
"""

from __future__ import annotations

import random
from collections import Counter

import pytest

from berth.domain.allocation_candidate import draws, order, rankings, world_patch
from berth.domain.allocation_candidate.engine import group_specs, plan, search
from berth.domain.allocation_candidate.request import Order, RequestGroup, RequestWide, Settings
from berth.domain.allocation_candidate.world import World
from support.candidate_worlds import prov


def test_ties_come_in_another_order_per_request() -> None:
    """Equal trees are drawn in a random order for each request, so
    concurrent schedulers do not all take the same first tree; every
    tree still comes exactly once."""
    world = World([prov(i, inv={"VCPU": 4}) for i in range(1, 41)])
    ranked = rankings.ranking(world, Order("spread"))
    firsts = set()
    for seed in range(20):
        walk = list(ranked.best_first(random.Random(seed)))
        assert sorted(walk) == sorted(world.roots)
        firsts.add(walk[0])
    assert len(firsts) > 5


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
    ranked = rankings.Ranking(
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
    ranked = rankings.Ranking.build(runs_world(), Order("pack"))
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
    ranked = rankings.Ranking.build(runs_world(), Order("spread"))
    short, long_ = set(), set()
    # Thirty requests miss one of the short run's five trees as its first
    # 0.6% of the time (5 x 0.8^30), so the draws go on until each came
    # first, up to 300 (a miss then: 5 x 0.8^300, about 1e-28).
    for n in range(300):
        walk = list(ranked.best_first(order.SOURCE))
        short.add(walk[3])
        if n < 30:
            long_.add(tuple(walk[9:14]))
        elif len(short) == 5:
            break
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
        kept = rankings.ranking(world, want)
        for _ in range(300):
            pid = rng.randint(1, 40)
            world = world_patch.with_usage(
                world, {pid: {"VCPU": rng.randint(0, size[pid])}}, in_place=True
            )
            assert world.rankings[want] is kept
            assert kept == rankings.Ranking.build(world, want)
            assert kept.roots == [r for _, r in sorted(kept.keys)]


def test_a_long_run_starts_with_a_fair_draw_then_walks_round() -> None:
    """A run of ties longer than ``rankings.LONG`` (here spread's 200 empty
    trees after two fuller ones): every root once, the run in its place;
    its first ``draws.FIRST`` roots drawn at random, each root of the run
    first about equally often (seeded; chi-square, 199 degrees of
    freedom, under 266.3, the 0.1% bound); the rest of the run in its
    own order from a random place, round, those drawn already left out."""
    world = World(
        [prov(i, inv={"VCPU": 4}, used={"VCPU": 2 if i > 200 else 0}) for i in range(1, 203)]
    )
    ranked = rankings.ranking(world, Order("spread"))
    run = ranked.roots[:200]
    assert sorted(run) == list(range(1, 201)) and rankings.LONG < 200
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
