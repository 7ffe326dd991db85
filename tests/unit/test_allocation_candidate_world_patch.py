"""A structural change to a few providers patches the world's indexes.

``world_patch.with_changes`` must give, index by index, what ``World`` builds
from the same providers, while copying only the entries the changed
providers leave or join and never modifying the old world. Each common
change is checked by example, and random sequences of changes (trees
nested two deep, sharing providers, traits, aggregates, classes) by a
property test.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from os_traits import MISC_SHARES_VIA_AGGREGATE as SHARING_TRAIT

from berth.domain.allocation_candidate import rankings, world_patch
from berth.domain.allocation_candidate.provider import Provider
from berth.domain.allocation_candidate.request import Order
from berth.domain.allocation_candidate.world import World
from berth.domain.capacity import Inventory
from support.candidate_worlds import assert_same


def patch(world: World, fresh: list[Provider], gone: tuple[int, ...] = ()) -> World:
    """``world`` patched, checked against a world built anew, and the old
    world checked unchanged."""
    before = World(world.providers.values())
    ranked(world)
    patched = world_patch.with_changes(world, fresh, gone)
    assert patched is not None
    providers = dict(world.providers)
    for pid in gone:
        del providers[pid]
    providers.update((p.id, p) for p in fresh)
    built = World(providers.values())
    assert_same(patched, built)
    assert_same(world, before, memos=False)
    for p in fresh:
        assert patched.providers[p.id] is p
    # In place, on a world of its own: the same result, nothing copied.
    victim = World(world.providers.values())
    ranked(victim)
    mine = victim.providers, victim.trees, victim.by_uuid, victim.ordered
    edited = world_patch.with_changes(victim, fresh, gone, in_place=True)
    assert edited is not None
    assert_same(edited, built)
    assert (edited.providers, edited.trees, edited.by_uuid) == mine[:3]
    assert edited.providers is mine[0] and edited.by_uuid is mine[2]
    return patched


#: Orders whose rankings the patched worlds keep (and ``assert_same``
#: checks against rankings of the world built anew).
ORDERS = (
    Order("spread", (("DISK_GB", 2.0), ("VCPU", 1.0)), (("T1", -1.0), ("T3", 0.5))),
    Order("pack"),
)


def ranked(world: World) -> World:
    """``world``, with a ranking kept for each of ``ORDERS``."""
    for each in ORDERS:
        rankings.ranking(world, each)
    return world


def rp(
    pid: int,
    uuid: str,
    root: int | None = None,
    parent: int | None = None,
    inv: tuple[str, ...] = ("VCPU",),
    traits: tuple[str, ...] = (),
    aggs: tuple[str, ...] = (),
) -> Provider:
    return Provider(
        pid,
        uuid,
        root or pid,
        parent,
        {rc: Inventory(8) for rc in inv},
        {},
        frozenset(traits),
        frozenset(aggs),
    )


def base() -> World:
    """Two hosts (one with NUMA children and a nested device), a third
    bare host, and a sharing disk pool in aggregate "A" with host 1.
    Uuids are not in id order."""
    return World(
        [
            rp(1, "m-host1", traits=("AVX",), aggs=("A",)),
            rp(2, "c-numa0", 1, 1, ("VCPU", "MEMORY_MB")),
            rp(3, "x-numa1", 1, 1, ("VCPU", "MEMORY_MB"), traits=("HT",)),
            rp(4, "a-pf", 1, 2, ("VF",), traits=("NIC",)),
            rp(5, "f-host2", aggs=("B",)),
            rp(6, "k-host3", traits=("AVX",)),
            rp(9, "p-pool", inv=("DISK_GB",), traits=(SHARING_TRAIT, "SSD"), aggs=("A",)),
        ]
    )


def change(world: World, pid: int, **fields: Any) -> Provider:
    return dataclasses.replace(world.providers[pid], **fields)


def test_a_new_compute_node_tree() -> None:
    world = base()
    patched = patch(
        world,
        [
            rp(20, "d-host4", traits=("AVX",), aggs=("B",)),
            rp(21, "z-numa", 20, 20, ("VCPU", "MEMORY_MB"), traits=("HT",)),
            rp(22, "b-gpu", 20, 21, ("VGPU",)),
        ],
    )
    assert patched.roots == [20, 5, 6, 1, 9]  # d-, f-, k-, m-, p-
    assert patched.trees[20] == [22, 20, 21]
    assert patched.tree_traits[20] == {"AVX", "HT"}
    # What no new provider is under is the old world's own object.
    assert patched.by_class["DISK_GB"] is world.by_class["DISK_GB"]
    assert patched.anchors is world.anchors
    assert patched.shared_into is world.shared_into


def test_a_provider_deleted() -> None:
    world = base()
    patched = patch(world, [], (4,))
    assert "NIC" not in patched.tree_traits[1]
    assert "VF" not in patched.by_class


def test_a_whole_tree_deleted() -> None:
    patched = patch(base(), [], (1, 2, 3, 4))
    assert patched.roots == [5, 6, 9]
    # The pool now serves no other tree.
    assert patched.anchors[9] == {9} and patched.shared_into == {}


def test_a_child_s_traits_changed() -> None:
    world = base()
    patched = patch(world, [change(world, 2, traits=frozenset({"FAST"}))])
    assert "FAST" in patched.tree_traits[1]
    assert patched.root_traits[patched.roots.index(1)] == patched.tree_traits[1]
    for name in (
        "ordered",
        "trees",
        "by_class",
        "tree_class",
        "by_agg",
        "by_uuid",
        "roots",
        "anchors",
    ):
        assert getattr(patched, name) is getattr(world, name), name


def test_a_bare_root_s_traits_changed() -> None:
    world = base()
    patched = patch(world, [change(world, 6, traits=frozenset())])
    assert patched.root_traits[patched.roots.index(6)] == frozenset()
    assert 6 not in patched.by_trait["AVX"]
    assert world.root_traits[world.roots.index(6)] == {"AVX"}


def test_joining_the_aggregate_of_a_sharing_provider() -> None:
    world = base()
    patched = patch(world, [change(world, 5, aggregates=frozenset({"A", "B"}))])
    assert patched.anchors[9] == {1, 5, 9}
    assert patched.shared_into == {1: [9], 5: [9]}
    assert patched.tree_labels(5) == ({"SSD", SHARING_TRAIT}, {"A", "B"})
    assert world.anchors[9] == {1, 9} and 5 not in world.shared_into


def test_a_child_leaving_the_aggregate_of_a_sharing_provider() -> None:
    world = base()
    joined = patch(world, [change(world, 3, aggregates=frozenset({"A"}))])
    left = patch(joined, [change(world, 1, aggregates=frozenset())])
    # The child still ties its tree to the pool.
    assert left.anchors[9] == {1, 9}
    gone = patch(left, [change(world, 3)])
    assert gone.anchors[9] == {9} and 1 not in gone.shared_into


@pytest.mark.parametrize("classes", [("VCPU", "PCPU"), ()])
def test_an_inventory_class_added_or_removed(classes: tuple[str, ...]) -> None:
    world = base()
    patch(world, [change(world, 6, inventories={rc: Inventory(4) for rc in classes})])


def test_moved_within_its_tree_shares_every_index() -> None:
    world = base()
    patched = patch(world, [change(world, 4, parent_id=3)])
    for name, index in vars(world).items():
        # (each world has its own map of rankings: one may be added to
        # either world later)
        if name not in ("providers", "memo", "ancestry", "rankings"):
            assert getattr(patched, name) is index, name


def test_reparented_to_another_tree() -> None:
    world = base()
    patched = patch(world, [change(world, 2, root_id=5, parent_id=5), change(world, 4, root_id=5)])
    assert patched.trees[5] == [4, 2, 5]
    assert patched.tree_class[(5, "VF")] == [4]
    assert (1, "VF") not in patched.tree_class


def test_a_child_made_a_root() -> None:
    world = base()
    patch(world, [change(world, 2, root_id=2, parent_id=None), change(world, 4, root_id=2)])


def test_memos_start_empty() -> None:
    world = base()
    world.memo["x"] = 1
    world.ancestors(4)
    patched = patch(world, [change(world, 6, traits=frozenset())])
    assert patched.memo == {} and patched.ancestry == {}
    assert world.memo == {"x": 1}


def test_nothing_indexed_changed_shares_every_index() -> None:
    world = base()
    patched = patch(world, [change(world, 1, used={"VCPU": 3})])
    assert patched.by_trait is world.by_trait
    assert patched.root_traits is world.root_traits


@pytest.mark.parametrize(
    "fresh",
    [
        # The pool's aggregates change: it serves host 2's tree too.
        lambda w: [change(w, 9, aggregates=frozenset({"A", "B"}))],
        # It leaves every aggregate: it serves nothing.
        lambda w: [change(w, 9, aggregates=frozenset())],
        # Its traits change: host 1's tree labels with it.
        lambda w: [change(w, 9, traits=frozenset({SHARING_TRAIT, "NVME"}))],
        # It stops sharing: host 1's tree no longer has it.
        lambda w: [change(w, 9, traits=frozenset({"SSD"}))],
        # A host becomes a sharing provider, or a new pool appears.
        lambda w: [change(w, 5, traits=frozenset({SHARING_TRAIT}))],
        lambda w: [rp(30, "q-pool", traits=(SHARING_TRAIT,), aggs=("B",))],
        lambda w: [rp(30, "q-pool", traits=(SHARING_TRAIT,))],
        # The pool moved under host 3 (nested sharing providers exist).
        lambda w: [change(w, 9, root_id=6, parent_id=6)],
        # A child of host 1 joins aggregate B as a new pool arrives in it.
        lambda w: [
            change(w, 4, aggregates=frozenset({"B"})),
            rp(30, "q-pool", traits=(SHARING_TRAIT,), aggs=("B",)),
        ],
    ],
)
def test_a_sharing_provider_changed_is_patched(fresh: Any) -> None:
    world = base()
    patch(world, fresh(world))


def test_a_sharing_provider_deleted_is_patched() -> None:
    world = base()
    assert "SSD" in world.tree_labels(1)[0]
    patched = patch(world, [], (9,))
    assert patched.sharing == [] and patched.shared_into == {}
    assert patched.tree_labels(1)[0] == frozenset({"AVX", "HT", "NIC"})


def test_a_new_pool_serves_the_trees_of_its_aggregate() -> None:
    world = base()
    patched = patch(world, [rp(30, "q-pool", traits=(SHARING_TRAIT, "FAST"), aggs=("B",))])
    assert patched.sharing == [9, 30]
    assert patched.shared_into[5] == [30]
    assert "FAST" in patched.tree_labels(5)[0]


@pytest.mark.parametrize(
    "fresh",
    [
        # A uuid another provider holds.
        lambda w: [rp(30, "f-host2")],
        # Too many.
        lambda w: [rp(100 + i, "n-%03d" % i) for i in range(world_patch.PATCH_MOST + 1)],
    ],
)
def test_rebuilt_instead(fresh: Any) -> None:
    world = base()
    assert world_patch.with_changes(world, fresh(world)) is None


# The property: random worlds, random changes, patch equals build.

CLASSES = ["VCPU", "DISK_GB", "VF"]
TRAITS = ["T1", "T2", "T3"]
AGGS = ["A1", "A2", "A3"]


class Walk:
    """A world's providers, changed at random as an API client could."""

    def __init__(self, data: st.DataObject) -> None:
        self.draw = data.draw
        self.providers: dict[int, Provider] = {}
        self.next_id = 1

    def new(self, root: int | None, parent: int | None, sharing: bool = False) -> Provider:
        pid = self.next_id
        self.next_id += 1
        traits = set(self.draw(st.sets(st.sampled_from(TRAITS))))
        if sharing:
            traits.add(SHARING_TRAIT)
        p = Provider(
            pid,
            "%02d-%d" % (self.draw(st.integers(0, 30)), pid),
            root or pid,
            parent,
            self.inventories(),
            {},
            frozenset(traits),
            frozenset(self.draw(st.sets(st.sampled_from(AGGS)))),
        )
        self.providers[pid] = p
        return p

    def inventories(self) -> dict[str, Inventory]:
        return {rc: Inventory(4) for rc in self.draw(st.sets(st.sampled_from(CLASSES), max_size=2))}

    def tree(self) -> list[int]:
        """A new tree: a root and up to four providers below, nested."""
        root = self.new(None, None)
        made = [root.id]
        for _ in range(self.draw(st.integers(0, 4))):
            parent = self.draw(st.sampled_from(made))
            made.append(self.new(root.id, parent).id)
        return made

    def below(self, pid: int) -> list[int]:
        """``pid`` and every provider under it."""
        found = [pid]
        for p in found:
            found.extend(c.id for c in self.providers.values() if c.parent_id == p)
        return found

    def replace(self, pid: int, **fields: Any) -> list[int]:
        self.providers[pid] = dataclasses.replace(self.providers[pid], **fields)
        return [pid]

    def step(self) -> list[int]:
        """One change; the ids it touched."""
        if not self.providers:
            return self.tree()
        ids = sorted(self.providers)
        pid = self.draw(st.sampled_from(ids))
        p = self.providers[pid]
        kind = self.draw(
            st.sampled_from(
                [
                    "tree",
                    "delete",
                    "traits",
                    "aggregates",
                    "classes",
                    "move",
                    "usage",
                    "share",
                    "flip",
                ]
            )
        )
        if kind == "tree":
            return self.tree()
        if kind == "delete":
            gone = self.below(pid)
            for q in gone:
                del self.providers[q]
            return gone
        if kind == "traits":
            traits = frozenset(self.draw(st.sets(st.sampled_from(TRAITS))))
            if SHARING_TRAIT in p.traits:
                traits |= {SHARING_TRAIT}
            return self.replace(pid, traits=traits)
        if kind == "aggregates":
            return self.replace(
                pid, aggregates=frozenset(self.draw(st.sets(st.sampled_from(AGGS))))
            )
        if kind == "classes":
            return self.replace(pid, inventories=self.inventories())
        if kind == "usage":
            return self.replace(pid, used={rc: 1 for rc in p.inventories})
        if kind == "share":
            return [self.new(None, None, sharing=True).id]
        if kind == "flip":
            # A provider becomes a sharing one, or stops being one.
            return self.replace(pid, traits=p.traits ^ {SHARING_TRAIT})
        return self.move(pid)

    def move(self, pid: int) -> list[int]:
        """``pid``'s subtree under another provider (maybe of another
        tree), or made a tree of its own."""
        mine = self.below(pid)
        others = [q for q in sorted(self.providers) if q not in mine]
        parent = self.draw(st.sampled_from([None] + others))
        root = pid if parent is None else self.providers[parent].root_id
        self.replace(pid, parent_id=parent)
        for q in mine:
            self.replace(q, root_id=root)
        return mine


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_patched_worlds_equal_built_ones(data: st.DataObject) -> None:
    patched_chain(data, in_place=False)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_worlds_patched_in_place_equal_built_ones(data: st.DataObject) -> None:
    patched_chain(data, in_place=True)


def patched_chain(data: st.DataObject, in_place: bool) -> None:
    """A chain of patches equals a world built anew after every step;
    copied, the old world stays as it was; in place (the old world is
    given up), the world's own maps are edited."""
    walk = Walk(data)
    for _ in range(data.draw(st.integers(1, 3))):
        walk.tree()
    for _ in range(data.draw(st.integers(0, 2))):
        walk.new(None, None, sharing=True)
    world = ranked(World(walk.providers.values()))
    for _ in range(data.draw(st.integers(1, 6))):
        before = dict(walk.providers)
        touched: set[int] = set()
        for _ in range(data.draw(st.integers(1, 3))):
            touched.update(walk.step())
        fresh = [walk.providers[pid] for pid in sorted(touched) if pid in walk.providers]
        gone = tuple(pid for pid in touched if pid not in walk.providers)
        patched = world_patch.with_changes(world, fresh, gone, in_place=in_place)
        built = World(walk.providers.values())
        # Uuids are unique and at most a few dozen providers change: the
        # world is always patched, sharing providers included.
        assert patched is not None
        assert_same(patched, built)
        if in_place:
            assert patched.providers is world.providers
        else:
            assert_same(world, World(before.values()))
        world = patched
