"""Worlds for the candidate engine's tests: hand-made providers
(``prov``) and groups, random small worlds and queries for its property
tests, the brute-force oracle they are checked against, and
``assert_same`` to compare two worlds index by index.

The oracle tries every assignment of providers to groups under every
anchor and keeps those that obey the rules, written out plainly here:
capacity of merged amounts, units, traits and aggregates (per provider
for a suffixed group; collectively, with root aggregates spanning the
tree, for the unsuffixed one), sharing through aggregates, isolation,
same_subtree and root_required.
"""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import strategies as st
from os_traits import MISC_SHARES_VIA_AGGREGATE as SHARING_TRAIT

from berth.domain.allocation_candidate.provider import Provider
from berth.domain.allocation_candidate.rankings import Ranking
from berth.domain.allocation_candidate.request import RequestGroup, RequestWide
from berth.domain.allocation_candidate.world import World
from berth.domain.capacity import Inventory, fits

CLASSES = ["VCPU", "DISK_GB", "VF"]
TRAITS = ["T1", "T2"]
AGGS = ["A1", "A2"]

Key = tuple[Any, ...]


def uid(pid: int) -> str:
    return "%08d-0000-0000-0000-000000000000" % pid


def prov(
    pid: int,
    root: int | None = None,
    parent: int | None = None,
    inv: dict[str, Any] | None = None,
    used: dict[str, int] | None = None,
    traits: tuple[str, ...] = (),
    aggs: tuple[str, ...] = (),
) -> Provider:
    """A provider; ``inv`` maps a class to a total or an Inventory."""
    invs = {
        rc: v if isinstance(v, Inventory) else Inventory(total=v) for rc, v in (inv or {}).items()
    }
    return Provider(
        id=pid,
        uuid=uid(pid),
        root_id=root or pid,
        parent_id=parent,
        inventories=invs,
        used=dict(used or {}),
        traits=frozenset(traits),
        aggregates=frozenset(aggs),
    )


def group(suffix: str = "", **kw: Any) -> RequestGroup:
    return RequestGroup(suffix=suffix, **kw)


def assert_same(patched: World, built: World, memos: bool = True) -> None:
    """Every attribute of ``patched`` equals ``built``'s (as the same
    type: a list as a list, a dict as a dict), except the memos, which
    are empty in both (or, without ``memos``, not compared)."""
    assert vars(patched).keys() == vars(built).keys()
    for name, want in vars(built).items():
        have = getattr(patched, name)
        if name in ("memo", "ancestry"):
            assert not memos or (have == {} and type(have) is dict), name
            continue
        if name == "rankings":
            # Each kept ranking is what ranking the world anew gives.
            for order, kept in have.items():
                assert kept == Ranking.build(built, order), order
            continue
        assert type(have) is type(want), name
        assert have == want, name
    # The values too: a set where __init__ makes a set, a list for a list.
    for name in (
        "by_trait",
        "by_agg",
        "anchors",
        "trees",
        "by_class",
        "tree_class",
        "shared_into",
        "tree_traits",
        "tree_aggs",
    ):
        for key, value in getattr(built, name).items():
            assert type(getattr(patched, name)[key]) is type(value), name
    for name in ("root_traits", "root_aggs"):
        assert all(type(a) is frozenset for a in getattr(patched, name)), name


@st.composite
def worlds(draw: Any, most: int = 4, trees: int = 3) -> World:
    """1 to ``trees`` trees of up to 5 providers, maybe a sharing
    provider; every inventory total and max_unit at most ``most``."""
    providers: list[Provider] = []
    next_id = itertools.count(1)

    def make(root: int | None, parent: int | None, sharing: bool) -> int:
        pid = next(next_id)
        inv = {}
        for rc in draw(st.sets(st.sampled_from(CLASSES), max_size=2)):
            total = draw(st.integers(1, most))
            inv[rc] = Inventory(
                total=total,
                reserved=draw(st.integers(0, 1)),
                min_unit=draw(st.sampled_from([1, 1, 2])),
                max_unit=draw(st.integers(1, most)),
                step_size=draw(st.sampled_from([1, 1, 2])),
                allocation_ratio=draw(st.sampled_from([1.0, 1.5])),
            )
        used = {rc: draw(st.integers(0, 2)) for rc in inv}
        traits = set(draw(st.sets(st.sampled_from(TRAITS))))
        if sharing:
            traits.add(SHARING_TRAIT)
        aggs = draw(st.sets(st.sampled_from(AGGS)))
        providers.append(
            prov(
                pid,
                root=root,
                parent=parent,
                inv=inv,
                used=used,
                traits=tuple(traits),
                aggs=tuple(aggs),
            )
        )
        return pid

    for _ in range(draw(st.integers(1, trees))):
        root = make(None, None, False)
        for _ in range(draw(st.integers(0, 2))):
            child = make(root, root, False)
            if draw(st.booleans()):
                make(root, child, False)
    for _ in range(draw(st.integers(0, 1))):
        make(None, None, True)
    return World(providers)


def trait_expr(draw: Any) -> tuple[tuple[frozenset[str], ...], frozenset[str]]:
    required = tuple(
        frozenset(s)
        for s in draw(st.lists(st.sets(st.sampled_from(TRAITS), min_size=1), max_size=1))
    )
    forbidden = frozenset(draw(st.sets(st.sampled_from(TRAITS), max_size=1)))
    if any(r <= forbidden for r in required):
        forbidden = frozenset()
    return required, forbidden


def in_tree(draw: Any) -> str | None:
    """Mostly none; else a provider that often exists (1, 2, 5) or not."""
    return draw(st.sampled_from([None] * 6 + [uid(1), uid(2), uid(5), uid(99)]))


@st.composite
def queries(draw: Any) -> tuple[list[RequestGroup], RequestWide]:
    groups = []
    if draw(st.booleans()):
        classes = draw(st.sets(st.sampled_from(CLASSES), min_size=1, max_size=2))
        req, forb = trait_expr(draw)
        member = tuple(
            frozenset(s)
            for s in draw(st.lists(st.sets(st.sampled_from(AGGS), min_size=1), max_size=1))
        )
        groups.append(
            RequestGroup(
                "",
                {rc: draw(st.integers(1, 2)) for rc in sorted(classes)},
                req,
                forb,
                member,
                frozenset(draw(st.sets(st.sampled_from(AGGS), max_size=1))),
                in_tree(draw),
            )
        )
    for n in range(draw(st.integers(0 if groups else 1, 2))):
        req, forb = trait_expr(draw)
        rc = draw(st.sampled_from(CLASSES))
        groups.append(
            RequestGroup(
                str(n + 1), {rc: draw(st.integers(1, 2))}, req, forb, in_tree=in_tree(draw)
            )
        )
    suffixed = [g.suffix for g in groups if g.suffix]
    subtrees: tuple[frozenset[str], ...] = ()
    if len(suffixed) == 2 and draw(st.booleans()):
        subtrees = (frozenset(suffixed),)
    root_req = frozenset(draw(st.sets(st.sampled_from(TRAITS), max_size=1)))
    return groups, RequestWide(
        group_policy=draw(st.sampled_from(["none", "isolate"])),
        root_required=root_req,
        same_subtrees=subtrees,
    )


def _traits_ok(have: frozenset[str], g: RequestGroup) -> bool:
    return have.isdisjoint(g.forbidden) and all(have & any_of for any_of in g.required)


def _in_aggs(p: Provider, g: RequestGroup) -> bool:
    return all(p.aggregates & any_of for any_of in g.member_of)


def _bad_aggs(p: Provider, g: RequestGroup) -> bool:
    return bool(p.aggregates & g.forbidden_aggs)


def _serving(world: World, anchor: int) -> list[Provider]:
    """Providers of the anchor's tree, then sharing providers of other
    trees that share an aggregate with some provider of this tree."""
    ps = list(world.providers.values())
    own = [p for p in ps if p.root_id == anchor]
    tree_aggs = set().union(*(p.aggregates for p in own))
    shared = [
        p
        for p in ps
        if SHARING_TRAIT in p.traits and p.root_id != anchor and p.aggregates & tree_aggs
    ]
    return own + shared


def _offers(
    world: World, g: RequestGroup, anchor: int
) -> list[tuple[tuple[tuple[int, str, int], ...], tuple[int, ...]]]:
    root = world.providers[anchor]
    serving = _serving(world, anchor)
    if g.in_tree is not None:
        named = [p for p in world.providers.values() if p.uuid == g.in_tree]
        if not named:
            return []
        # A suffixed group's provider must be in the named tree; the
        # unsuffixed group is built in that tree alone, without sharing.
        tree = named[0].root_id
        if not g.suffix and anchor != tree:
            return []
        serving = [p for p in serving if p.root_id == tree]
    if g.suffix:
        return [
            (tuple((p.id, rc, n) for rc, n in g.resources.items()), (p.id,))
            for p in serving
            if all(
                rc in p.inventories and fits(p.inventories[rc], p.used.get(rc, 0), n)
                for rc, n in g.resources.items()
            )
            and _traits_ok(p.traits, g)
            and _in_aggs(p, g)
            and not _bad_aggs(p, g)
        ]
    if _bad_aggs(root, g):
        return []
    per_class = []
    for rc, n in sorted(g.resources.items()):
        per_class.append(
            [
                p
                for p in serving
                if rc in p.inventories
                and fits(p.inventories[rc], p.used.get(rc, 0), n)
                and not _bad_aggs(p, g)
                and (_in_aggs(p, g) or (p.root_id == anchor and _in_aggs(root, g)))
            ]
        )
    found = []
    for combo in itertools.product(*per_class):
        ps = {p.id: p for p in combo}
        have = frozenset().union(*(p.traits for p in ps.values()))
        if any(p.traits & g.forbidden for p in ps.values()):
            continue
        if not _traits_ok(have, g):
            continue
        allocs = tuple(
            (p.id, rc, g.resources[rc]) for rc, p in zip(sorted(g.resources), combo, strict=True)
        )
        found.append((allocs, tuple(sorted(ps))))
    return found


def _ancestors(world: World, pid: int) -> set[int]:
    out = {pid}
    while world.providers[pid].parent_id is not None:
        pid = world.providers[pid].parent_id  # type: ignore[assignment]
        out.add(pid)
    return out


def oracle(world: World, groups: list[RequestGroup], wide: RequestWide) -> set[Key]:
    """Every valid candidate, under any anchor."""
    keys: set[Key] = set()
    for anchor in (p.id for p in world.providers.values() if p.parent_id is None):
        keys |= oracle_at(world, groups, wide, anchor)
    return keys


def oracle_at(world: World, groups: list[RequestGroup], wide: RequestWide, anchor: int) -> set[Key]:
    """The valid candidates built around the tree rooted at ``anchor``."""
    keys: set[Key] = set()
    root = world.providers[anchor]
    if not (wide.root_required <= root.traits and root.traits.isdisjoint(wide.root_forbidden)):
        return keys
    for choice in itertools.product(*(_offers(world, g, anchor) for g in groups)):
        key = _valid(world, groups, wide, choice)
        if key is not None:
            keys.add(key)
    return keys


def _valid(
    world: World, groups: list[RequestGroup], wide: RequestWide, choice: tuple[Any, ...]
) -> Key | None:
    granular = [prov_ids[0] for g, (_, prov_ids) in zip(groups, choice, strict=True) if g.suffix]
    if wide.group_policy == "isolate" and len(set(granular)) < len(granular):
        return None
    totals: dict[tuple[int, str], int] = {}
    for allocs, _ in choice:
        for pid, rc, n in allocs:
            totals[(pid, rc)] = totals.get((pid, rc), 0) + n
    for (pid, rc), n in totals.items():
        inv = world.providers[pid].inventories[rc]
        if n > inv.max_unit or world.providers[pid].used.get(rc, 0) + n > inv.capacity:
            return None
    by_suffix = {g.suffix: ids for g, (_, ids) in zip(groups, choice, strict=True)}
    for names in wide.same_subtrees:
        pids = {p for s in names for p in by_suffix[s]}
        common = set.intersection(*(_ancestors(world, p) for p in pids))
        if not common & pids:
            return None
    return (
        tuple(sorted((p, rc, n) for (p, rc), n in totals.items())),
        tuple(sorted(by_suffix.items())),
    )
