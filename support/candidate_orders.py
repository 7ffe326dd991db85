"""The score of the candidate orders worked out plainly, for the order
tests (docs/allocation-candidates.md): ``plain_score`` of a tree from its
providers alone, and ``orders``, any scored order (weights and
preferences) for hypothesis to draw."""

from __future__ import annotations

from hypothesis import strategies as st

from berth.domain.allocation_candidate.request import SCORED, Order
from berth.domain.allocation_candidate.world import World
from support.candidate_worlds import CLASSES, TRAITS


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
