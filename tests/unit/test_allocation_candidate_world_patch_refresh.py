"""A refresh that changes only inventory amounts keeps the world's indexes.

Rebuilding the indexes costs about 0.1 s per 10,000 hosts, and each
worker would pay it after every inventory update an agent sends. When the
providers read again differ only in what no index holds (inventory
amounts, usage), ``world_patch.with_providers`` swaps them in and shares every
index; anything an index holds forces the rebuild.
"""

from __future__ import annotations

import dataclasses

import pytest

from berth.domain.allocation_candidate import world_patch
from berth.domain.allocation_candidate.provider import Provider
from berth.domain.allocation_candidate.world import World
from berth.domain.capacity import Inventory


def _world() -> World:
    return World(
        [
            Provider(
                1,
                "a",
                1,
                None,
                {"VCPU": Inventory(8)},
                {"VCPU": 2},
                frozenset({"HW_CPU_X86_AVX2"}),
                frozenset({"agg1"}),
                ("HW_CPU_X86_AVX2",),
            ),
            Provider(2, "b", 1, 1, {"SRIOV_NET_VF": Inventory(4)}),
            Provider(3, "c", 3, None, {"VCPU": Inventory(16)}),
        ]
    )


def test_amounts_only_share_every_index() -> None:
    world = _world()
    fresh = dataclasses.replace(
        world.providers[1], inventories={"VCPU": Inventory(32, reserved=4)}, used={"VCPU": 5}
    )
    other = world_patch.with_providers(world, [fresh])
    assert other is not None
    assert other.providers[1].room["VCPU"] == (23, 1, 2147483647, 1)
    assert world.providers[1].room["VCPU"][0] == 6  # the old world is intact
    for index in (
        "by_trait",
        "by_agg",
        "trees",
        "tree_class",
        "ordered",
        "roots",
        "anchors",
        "shared_into",
        "by_uuid",
    ):
        assert getattr(other, index) is getattr(world, index), index
    rebuilt = World(other.providers.values())
    for index in (
        "by_trait",
        "by_agg",
        "trees",
        "tree_class",
        "ordered",
        "roots",
        "anchors",
        "shared_into",
        "by_uuid",
    ):
        assert getattr(other, index) == getattr(rebuilt, index), index


@pytest.mark.parametrize(
    "change",
    [
        {"inventories": {"VCPU": Inventory(8), "DISK_GB": Inventory(100)}},
        {"inventories": {}},
        {"traits": frozenset(), "trait_list": ()},
        {"aggregates": frozenset({"agg2"})},
        {"root_id": 3, "parent_id": 3},
        {"uuid": "z"},
    ],
)
def test_anything_an_index_holds_forces_a_rebuild(change: dict[str, object]) -> None:
    world = _world()
    fresh = dataclasses.replace(world.providers[1], **change)
    assert world_patch.with_providers(world, [fresh]) is None


def test_a_provider_the_world_never_had_forces_a_rebuild() -> None:
    assert world_patch.with_providers(_world(), [Provider(9, "n", 9)]) is None
