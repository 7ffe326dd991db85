"""A ranking of many blocks (``rankings.Ranking``, ``rankings.BLOCK``): claims,
new roots and roots gone keep it the ranking built anew, cut only
between runs of ties, its blocks no longer than ``BLOCK`` (but a single
run), ``firsts`` the first score of each; a copy shares the blocks it
did not edit and leaves the original as it was. ``BLOCK`` is made small
here, so that a world of a few dozen trees spans many blocks.
"""

from __future__ import annotations

import itertools
import random
from collections import Counter

import pytest

from berth.domain.allocation_candidate import draws, order, rankings, world_patch
from berth.domain.allocation_candidate.request import Order
from berth.domain.allocation_candidate.world import World
from support.candidate_worlds import prov


def check_blocks(ranking: rankings.Ranking) -> None:
    """The invariants of a ranking's blocks."""
    blocks = ranking.blocks
    assert blocks
    assert len(blocks) == 1 or all(b.roots for b in blocks)
    assert len(ranking.firsts) == len(blocks)
    for block, first in zip(blocks, ranking.firsts, strict=True):
        roots, scores, ties = block.roots, block.scores, block.ties
        assert len(roots) == len(scores) == len(ties)
        if not roots:
            continue
        assert first == scores[0]
        assert list(ties) == [int(a == b) for a, b in itertools.pairwise(scores)] + [0]
        if len(roots) > rankings.BLOCK:
            # Only a single run of ties is left longer.
            assert len(set(scores)) == 1
    for left, right in itertools.pairwise(blocks):
        # No run of ties spans two blocks.
        assert left.scores[-1] < right.scores[0]


def sized_world(rng: random.Random, count: int) -> tuple[World, dict[int, int]]:
    """``count`` one-provider trees of seven sizes, many used: runs of
    ties of many lengths (the empty ones, longer than a small ``BLOCK``;
    those alike in size and use) among distinct scores."""
    size = {i: 4 + i % 7 for i in range(1, count + 1)}
    world = World(
        [
            prov(i, inv={"VCPU": size[i]}, used={"VCPU": rng.choice((0, rng.randint(1, size[i])))})
            for i in range(1, count + 1)
        ]
    )
    return world, size


@pytest.mark.parametrize("block", [4, 16])
@pytest.mark.parametrize("name", ["spread", "pack"])
def test_claims_keep_many_blocks_exact(
    monkeypatch: pytest.MonkeyPatch, block: int, name: str
) -> None:
    """Claims in place (as ``berth serve``'s workers refresh) move trees
    within a block and from one block to another, into and out of runs
    of ties: after each, the ranking is the one built anew, and its
    blocks keep their invariants."""
    monkeypatch.setattr(rankings, "BLOCK", block)
    rng = random.Random(block)
    world, size = sized_world(rng, 120)
    want = Order(name)
    kept = rankings.ranking(world, want)
    assert len(kept.blocks) > 3
    check_blocks(kept)
    for _ in range(400):
        pid = rng.randint(1, 120)
        world = world_patch.with_usage(
            world, {pid: {"VCPU": rng.randint(0, size[pid])}}, in_place=True
        )
        assert world.rankings[want] is kept
        check_blocks(kept)
        assert kept == rankings.Ranking.build(world, want)
    walk = list(kept.best_first(random.Random(1)))
    assert sorted(walk) == sorted(world.roots)


@pytest.mark.parametrize("block", [4, 16])
def test_roots_come_and_go_across_blocks(monkeypatch: pytest.MonkeyPatch, block: int) -> None:
    """Roots taken out (a tree gone) and put back (a new tree) empty
    blocks, merge small ones and cut full ones, and the ranking stays
    the one built anew, down to a single root and back."""
    monkeypatch.setattr(rankings, "BLOCK", block)
    rng = random.Random(7)
    full, _ = sized_world(rng, 50)
    want = Order("spread")
    kept = rankings.Ranking.build(full, want)
    present = set(full.roots)
    for step in range(300):
        # Mostly away first, then mostly back.
        leave = rng.random() < (0.7 if step < 150 else 0.3)
        pool = present if leave else set(full.roots) - present
        if not pool or (leave and len(present) == 1):
            continue
        root = rng.choice(sorted(pool))
        was = order.key(full, root, want)
        present ^= {root}
        world = World([p for p in full.providers.values() if p.id in present])
        kept = kept.patched(world, {root: was if leave else None}, in_place=True)
        check_blocks(kept)
        assert kept == rankings.Ranking.build(world, want)


def test_a_copy_shares_the_blocks_it_leaves_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A refresh by copy (a threaded server's) edits copies of the blocks
    it touches and shares the rest; the old world's ranking is unchanged."""
    monkeypatch.setattr(rankings, "BLOCK", 4)
    rng = random.Random(3)
    world, size = sized_world(rng, 60)
    want = Order("spread")
    kept = rankings.ranking(world, want)
    for _ in range(50):
        before = kept.keys
        pid = rng.randint(1, 60)
        fresh = world_patch.with_usage(world, {pid: {"VCPU": rng.randint(0, size[pid])}})
        copied = fresh.rankings[want]
        assert kept.keys == before
        check_blocks(copied)
        assert copied == rankings.Ranking.build(fresh, want)
        shared = {id(b) for b in kept.blocks} & {id(b) for b in copied.blocks}
        # A move edits at most the two blocks it leaves and enters (a
        # cut or a merge makes one or two more of its own).
        assert len(shared) >= len(kept.blocks) - 3
        world, kept = fresh, copied


def test_a_draw_and_its_extra_number() -> None:
    """``draws._drawn`` gives ``k`` distinct numbers of its range and one
    more, each number of the range equally likely to be that extra one
    (seeded; chi-square, 19 degrees of freedom, under 43.8, the 0.1%
    bound), whichever were drawn."""
    rng = random.Random(11)
    extra: Counter[int] = Counter()
    for _ in range(20_000):
        picks, first = draws._drawn(20, 16, rng, 100)
        assert len(set(picks)) == 16
        assert all(100 <= p < 120 for p in picks) and 100 <= first < 120
        extra[first] += 1
    expected = 20_000 / 20
    assert sum((extra[n] - expected) ** 2 / expected for n in range(100, 120)) < 43.8


def test_a_ranking_of_no_roots_takes_one() -> None:
    """An empty world's ranking is one empty block; a tree put in it is
    found, and taken out again leaves it empty."""
    empty = World([])
    want = Order("pack")
    kept = rankings.Ranking.build(empty, want)
    check_blocks(kept)
    assert list(kept.best_first(random.Random(0))) == []
    one = World([prov(1, inv={"VCPU": 4}, used={"VCPU": 1})])
    kept = kept.patched(one, {1: None}, in_place=True)
    check_blocks(kept)
    assert kept == rankings.Ranking.build(one, want)
    kept = kept.patched(empty, {1: order.key(one, 1, want)}, in_place=True)
    assert kept == rankings.Ranking.build(empty, want)
    check_blocks(kept)
