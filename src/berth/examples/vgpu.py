"""Example driver: VGPU inventory moves from the node to per-GPU children.

Old layout (``nested=False``): the node's root provider has ``VCPU``,
``MEMORY_MB`` and all the ``VGPU`` of every physical GPU. New layout: the
root keeps ``VCPU`` and ``MEMORY_MB``; each physical GPU is a child
provider named ``<node>_<gpu>`` with its own ``VGPU`` inventory and the
trait ``CUSTOM_PGPU``. Moving from old to new needs a reshape, because
instances may already hold VGPUs on the root.

The layout comes from the constructor or, for ``berth migrate-inventory
--driver berth.examples.vgpu:VGPUDriver``, from the JSON in
``$BERTH_EXAMPLE_VGPU``, e.g.::

    {"compute-1": {"vcpus": 16, "memory_mb": 32768,
                   "gpus": {"gpu0": 4, "gpu1": 4}}}
"""

from __future__ import annotations

import json
import os
from typing import Any

from berth.client import ProviderTree, ReshapeNeeded, move_allocations
from berth.client.provider_tree import AllocationsDict

Layout = dict[str, dict[str, Any]]

ENV = "BERTH_EXAMPLE_VGPU"
TRAIT = "CUSTOM_PGPU"


class VGPUDriver:
    """Reports one node per layout entry; ``nested`` picks the layout."""

    def __init__(self, layout: Layout | None = None, *, nested: bool = True) -> None:
        if layout is None:
            layout = json.loads(os.environ.get(ENV, "{}"))
        self.layout: Layout = layout
        self.nested = nested

    def get_available_nodes(self) -> list[str]:
        return list(self.layout)

    def update_provider_tree(
        self, provider_tree: ProviderTree, nodename: str, allocations: AllocationsDict | None = None
    ) -> None:
        node = self.layout[nodename]
        root_inv: dict[str, dict[str, Any]] = {
            "VCPU": {"total": node["vcpus"]},
            "MEMORY_MB": {"total": node["memory_mb"]},
        }
        if not self.nested:
            root_inv["VGPU"] = {"total": sum(node["gpus"].values())}
            provider_tree.update_inventory(nodename, root_inv)
            return
        if "VGPU" in provider_tree.data(nodename).inventory:
            # Instances may hold VGPUs on the root: moving the inventory
            # without their allocations would strand them.
            if allocations is None:
                raise ReshapeNeeded(
                    "VGPU inventory of %s moves to per-GPU child providers" % nodename
                )
        children = self._ensure_children(provider_tree, nodename, node)
        if allocations is not None:
            self._move(provider_tree, nodename, children, allocations)
        provider_tree.update_inventory(nodename, root_inv)

    def _ensure_children(
        self, tree: ProviderTree, nodename: str, node: dict[str, Any]
    ) -> dict[str, int]:
        """Child uuid -> VGPU capacity, creating missing children."""
        children = {}
        for gpu, count in node["gpus"].items():
            name = "%s_%s" % (nodename, gpu)
            if not tree.exists(name):
                tree.new_child(name, nodename)
            tree.update_inventory(name, {"VGPU": {"total": count, "max_unit": count}})
            tree.update_traits(name, [TRAIT])
            children[tree.data(name).uuid] = count
        return children

    def _move(
        self,
        tree: ProviderTree,
        nodename: str,
        children: dict[str, int],
        allocations: AllocationsDict,
    ) -> None:
        """Place each consumer's root VGPUs on the first GPU with room."""
        root = tree.data(nodename).uuid
        free = dict(children)
        for record in allocations.values():
            for rp, entry in record["allocations"].items():
                if rp in free:
                    free[rp] -= entry["resources"].get("VGPU", 0)
        for consumer in sorted(allocations):
            by_rp = allocations[consumer]["allocations"]
            want = by_rp.get(root, {}).get("resources", {}).get("VGPU", 0)
            if not want:
                continue
            target = next((u for u, room in free.items() if room >= want), None)
            if target is None:
                raise ValueError(
                    "no GPU of %s has room for the %d VGPU of "
                    "consumer %s" % (nodename, want, consumer)
                )
            move_allocations(allocations, root, target, "VGPU", consumers=[consumer])
            free[target] -= want
