"""ProviderTree, move_allocations and the client's pinned public names."""

from __future__ import annotations

import copy
import importlib.resources
import threading
import tomllib
from pathlib import Path

import pytest

import berth.client
from berth.client import ProviderNotInTree, ProviderTree, move_allocations, normalize_inventory

ROOT, CHILD, GRANDCHILD = (
    "11111111-1111-1111-1111-111111111111",
    "22222222-2222-2222-2222-222222222222",
    "33333333-3333-3333-3333-333333333333",
)


def test_public_names_are_pinned() -> None:
    assert sorted(berth.client.__all__) == [
        "AllocationUpdateFailed",
        "PlacementAPIError",
        "PlacementError",
        "ProviderData",
        "ProviderNotInTree",
        "ProviderTree",
        "ReportClient",
        "ReshapeFailed",
        "ReshapeNeeded",
        "ResourceProviderUpdateFailed",
        "TreeDiff",
        "move_allocations",
        "normalize_inventory",
    ]
    for name in berth.client.__all__:
        assert getattr(berth.client, name) is not None


def test_the_package_says_it_is_typed() -> None:
    """PEP 561: without py.typed, mypy treats an installed berth.client as
    untyped; package-data is what puts the file in the wheel."""
    assert (importlib.resources.files("berth") / "py.typed").is_file()
    with open(Path(__file__).parents[2] / "pyproject.toml", "rb") as f:
        package_data = tomllib.load(f)["tool"]["setuptools"]["package-data"]
    assert "py.typed" in package_data["berth"]


def test_exception_tree_matches_its_docstring() -> None:
    c = berth.client
    assert issubclass(c.ReshapeFailed, c.ResourceProviderUpdateFailed)
    assert issubclass(c.ProviderNotInTree, ValueError)
    for name in (
        "PlacementAPIError",
        "ProviderNotInTree",
        "ReshapeNeeded",
        "ResourceProviderUpdateFailed",
        "AllocationUpdateFailed",
    ):
        assert issubclass(getattr(c, name), c.PlacementError)


def _tree() -> ProviderTree:
    tree = ProviderTree()
    tree.new_root("node", ROOT, generation=4)
    tree.new_child("node_gpu", "node", CHILD)
    tree.new_child("node_gpu_fn", CHILD, GRANDCHILD)
    return tree


def test_structure_and_lookup_by_name_or_uuid() -> None:
    tree = _tree()
    assert tree.exists("node") and tree.exists(CHILD)
    assert tree.data("node_gpu").parent_uuid == ROOT
    assert tree.data(ROOT).generation == 4
    assert tree.get_provider_uuids() == [ROOT, CHILD, GRANDCHILD]
    assert tree.get_provider_uuids(CHILD) == [CHILD, GRANDCHILD]
    assert tree.roots == [ROOT]
    with pytest.raises(ProviderNotInTree):
        tree.data("nope")
    with pytest.raises(ProviderNotInTree):
        tree.new_child("node", ROOT)  # name taken


def test_remove_takes_descendants() -> None:
    tree = _tree()
    tree.remove("node_gpu")
    assert tree.get_provider_uuids() == [ROOT]
    assert not tree.exists(GRANDCHILD) and not tree.exists("node_gpu_fn")
    tree.new_child("node_gpu", ROOT)  # the name is free again


def test_inventory_compares_only_the_fields_given() -> None:
    tree = _tree()
    assert tree.update_inventory("node", {"VCPU": {"total": 8}})
    full = normalize_inventory({"VCPU": {"total": 8}})["VCPU"]
    assert full == {
        "total": 8,
        "reserved": 0,
        "min_unit": 1,
        "max_unit": 2147483647,
        "step_size": 1,
        "allocation_ratio": 1.0,
    }
    # A field the current record lacks compares as Placement's default.
    assert not tree.has_inventory_changed("node", {"VCPU": full})
    assert not tree.update_inventory("node", {"VCPU": {"total": 8}})
    assert tree.has_inventory_changed("node", {"VCPU": {"total": 9}})
    assert tree.has_inventory_changed("node", {"VCPU": {"total": 8, "allocation_ratio": 4.0}})
    assert tree.has_inventory_changed("node", {})  # class dropped
    assert tree.has_inventory_changed("node", {"VCPU": {"total": 8}, "DISK_GB": {"total": 1}})
    with pytest.raises(ValueError):
        tree.update_inventory("node", {"VCPU": {"total": 1, "bogus": 2}})


def test_operator_fields_are_kept_when_the_driver_leaves_them_out() -> None:
    tree = _tree()
    operator = {"total": 16, "reserved": 2, "allocation_ratio": 4.0}
    tree.update_inventory("node", {"VCPU": operator})
    assert not tree.update_inventory("node", {"VCPU": {"total": 16}})
    # Unchanged: the fuller record stays for the next comparison.
    assert tree.data("node").inventory == {"VCPU": operator}
    assert tree.update_inventory("node", {"VCPU": {"total": 32}})
    assert tree.data("node").inventory == {"VCPU": {"total": 32}}
    assert tree.has_inventory("node") and not tree.has_inventory(CHILD)


def test_data_is_a_copy() -> None:
    tree = _tree()
    tree.update_inventory("node", {"VCPU": {"total": 8}})
    data = tree.data("node")
    data.inventory["VCPU"]["total"] = 99
    assert tree.data("node").inventory["VCPU"]["total"] == 8


def test_traits_and_aggregates() -> None:
    tree = _tree()
    assert tree.update_traits("node", ["HW_CPU_X86_AVX"])
    assert not tree.update_traits("node", ["HW_CPU_X86_AVX"])
    tree.add_traits("node", "CUSTOM_A", "CUSTOM_B")
    tree.remove_traits("node", "CUSTOM_A")
    assert tree.data("node").traits == {"HW_CPU_X86_AVX", "CUSTOM_B"}
    assert tree.has_traits("node", ["CUSTOM_B"])
    assert not tree.has_traits("node", ["CUSTOM_A"])
    agg = "44444444-4444-4444-4444-444444444444"
    assert tree.update_aggregates("node", [agg], generation=7)
    assert tree.data("node").aggregates == {agg}
    assert tree.data("node").generation == 7
    # Nova's add and remove, which leave the other aggregates alone.
    other = "55555555-5555-5555-5555-555555555555"
    tree.add_aggregates("node", other)
    assert tree.in_aggregates("node", [agg, other])
    tree.remove_aggregates("node", agg)
    assert tree.data("node").aggregates == {other}


def test_move_inventory() -> None:
    tree = _tree()
    tree.update_inventory("node", {"VCPU": {"total": 8}, "VGPU": {"total": 4}})
    tree.move_inventory("node", "node_gpu", "VGPU", {"total": 2})
    assert set(tree.data("node").inventory) == {"VCPU"}
    assert tree.data("node_gpu").inventory["VGPU"]["total"] == 2
    with pytest.raises(ProviderNotInTree):
        tree.move_inventory("node", "node_gpu", "VGPU")


def test_snapshot_shares_nothing() -> None:
    tree = _tree()
    copy = tree.snapshot()
    copy.remove("node_gpu")
    copy.update_inventory("node", {"VCPU": {"total": 1}})
    assert tree.exists("node_gpu")
    assert tree.data("node").inventory == {}


def test_compare_orders_creations_and_deletions() -> None:
    old = _tree()
    new = old.snapshot()
    new.remove("node_gpu")
    a = new.new_child("a", "node")
    b = new.new_child("b", a)
    new.update_inventory("node", {"VCPU": {"total": 1}})
    new.add_traits("node", "CUSTOM_X")
    new.rename("node", "renamed")
    diff = old.compare(new)
    assert diff.added == (a, b)
    assert diff.removed == (GRANDCHILD, CHILD)
    assert diff.inventory == (ROOT,) and diff.traits == (ROOT,)
    assert diff.renamed == (ROOT,) and diff.aggregates == ()
    assert old.compare(old.snapshot()).empty


def test_nova_query_methods() -> None:
    tree = _tree()
    agg = "44444444-4444-4444-4444-444444444444"
    tree.update_traits("node", ["HW_CPU_X86_AVX"])
    tree.update_aggregates("node", [agg])
    assert not tree.have_traits_changed("node", ["HW_CPU_X86_AVX"])
    assert tree.have_traits_changed("node", [])
    assert tree.in_aggregates("node", [agg]) and tree.in_aggregates("node", [])
    assert not tree.in_aggregates(CHILD, [agg])
    assert not tree.have_aggregates_changed("node", {agg})
    assert tree.have_aggregates_changed(CHILD, [agg])
    assert tree.get_provider_uuids_in_tree(GRANDCHILD) == [ROOT, CHILD, GRANDCHILD]
    assert tree.update_resources(CHILD, {"CUSTOM_PMEM": ["ns0", "ns1"]})
    assert not tree.update_resources(CHILD, {"CUSTOM_PMEM": {"ns1", "ns0"}})
    assert tree.data(CHILD).resources == {"CUSTOM_PMEM": frozenset({"ns0", "ns1"})}


def test_sharing_provider_is_found_by_class_and_trait() -> None:
    tree = _tree()
    pool = tree.new_root("pool")
    tree.update_inventory(pool, {"DISK_GB": {"total": 1000}})
    assert not tree.has_sharing_provider("DISK_GB")  # not marked sharing
    tree.add_traits(pool, "MISC_SHARES_VIA_AGGREGATE")
    assert tree.has_sharing_provider("DISK_GB")
    assert not tree.has_sharing_provider("VCPU")


def test_names_are_unique_per_root_as_in_nova() -> None:
    tree = _tree()
    other = tree.new_root("other")
    # The same child name in another tree is fine...
    dup = tree.new_child("node_gpu", other)
    # ...but not twice in one tree, nor two roots with one name.
    with pytest.raises(ProviderNotInTree):
        tree.new_child("node_gpu", ROOT)
    tree.new_child("node_gpu_fn", dup)  # free in the tree of "other"
    with pytest.raises(ProviderNotInTree):
        tree.new_root("other")
    # Lookup by name finds the first tree's provider.
    assert tree.data("node_gpu").uuid == CHILD
    with pytest.raises(ProviderNotInTree):
        tree.rename(dup, "other")  # its root's name
    with pytest.raises(ProviderNotInTree):
        tree.rename("other", "node_gpu")  # a name in its tree
    with pytest.raises(ProviderNotInTree):
        tree.rename("other", "node")  # another root's name
    tree.rename("other", "node_gpu_fn_2")
    assert tree.data("node_gpu_fn_2").uuid == other


def test_deepcopy_and_populate_from_iterable() -> None:
    tree = _tree()
    tree.update_inventory("node", {"VCPU": {"total": 8}})
    clone = copy.deepcopy(tree)
    clone.update_inventory("node", {"VCPU": {"total": 1}})
    assert tree.data("node").inventory["VCPU"]["total"] == 8
    new = "55555555-5555-5555-5555-555555555555"
    tree.populate_from_iterable(
        [
            {"uuid": CHILD, "name": "gpu-renamed", "generation": 3, "parent_provider_uuid": ROOT},
            {
                "uuid": new,
                "name": "pool",
                "generation": 1,
                "parent_provider_uuid": None,
                "traits": ["CUSTOM_X"],
                "inventories": {"DISK_GB": {"total": 10}},
            },
        ]
    )
    # CHILD was replaced, and its unlisted descendant dropped.
    assert tree.data(CHILD).name == "gpu-renamed"
    assert tree.data(CHILD).generation == 3
    assert not tree.exists(GRANDCHILD)
    assert tree.roots == [ROOT, new] and tree.has_traits(new, ["CUSTOM_X"])
    with pytest.raises(ProviderNotInTree):
        tree.populate_from_iterable([{"uuid": "x", "name": "x", "parent_provider_uuid": "missing"}])


def test_reparent_moves_the_subtree_and_compares_as_moved() -> None:
    old = _tree()
    new = old.snapshot()
    new.reparent(GRANDCHILD, ROOT)
    assert new.data(GRANDCHILD).parent_uuid == ROOT
    assert new.get_provider_uuids(CHILD) == [CHILD]
    assert old.compare(new).reparented == (GRANDCHILD,)
    with pytest.raises(ProviderNotInTree):
        new.reparent(ROOT, CHILD)  # under its own descendant
    new.reparent(CHILD, None)
    assert new.roots == [ROOT, CHILD]
    # Parents before children, in the new tree's order.
    assert old.compare(new).reparented == (GRANDCHILD, CHILD)


def test_concurrent_edits_are_all_kept() -> None:
    tree = ProviderTree()
    tree.new_root("node")

    def add(i: int) -> None:
        for j in range(50):
            tree.new_child("c%d_%d" % (i, j), "node")
            tree.add_traits("node", "CUSTOM_T%d_%d" % (i, j))

    threads = [threading.Thread(target=add, args=(i,)) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert len(tree.get_provider_uuids()) == 1 + 8 * 50
    assert len(tree.data("node").traits) == 8 * 50


def _allocs() -> dict:
    return {
        "c1": {
            "allocations": {ROOT: {"resources": {"VGPU": 2, "VCPU": 1}}},
            "project_id": "p",
            "user_id": "u",
        },
        "c2": {
            "allocations": {ROOT: {"resources": {"VGPU": 1}}},
            "project_id": "p",
            "user_id": "u",
        },
    }


def test_move_allocations_all_or_part() -> None:
    allocs = _allocs()
    assert move_allocations(allocs, ROOT, CHILD, "VGPU") == 3
    assert allocs["c1"]["allocations"] == {
        ROOT: {"resources": {"VCPU": 1}},
        CHILD: {"resources": {"VGPU": 2}},
    }
    # c2 had only VGPU on the root: the emptied root entry goes away.
    assert allocs["c2"]["allocations"] == {CHILD: {"resources": {"VGPU": 1}}}

    allocs = _allocs()
    assert move_allocations(allocs, ROOT, CHILD, "VGPU", amount=1, consumers=["c1"]) == 1
    assert allocs["c1"]["allocations"][ROOT]["resources"] == {"VGPU": 1, "VCPU": 1}
    assert allocs["c2"] == _allocs()["c2"]
