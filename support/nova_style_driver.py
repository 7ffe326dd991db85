"""A test driver written only against the Nova-shaped surface.

It is shaped like a Nova virt driver's resource reporting: the node
reports VCPU, MEMORY_MB and DISK_GB; DISK_GB comes from a sharing pool
when one is associated through an aggregate (the libvirt driver's check);
with ``numa`` set, CPU and memory move to NUMA children marked
HW_NUMA_ROOT, which needs a reshape when instances already hold them on
the root. It uses only calls Nova's ProviderTree offers, and plain dict
edits of the allocations (no Berth helper).

Configured by the JSON in ``$NOVA_STYLE_DRIVER``:
``{"<node>": {"vcpus": 8, "memory_mb": 4096, "disk_gb": 100, "numa": 2}}``
(``numa`` 0: the flat layout).
"""

from __future__ import annotations

import json
import os
from typing import Any

from berth.client import ReshapeNeeded

NUMA_TRAIT = "HW_NUMA_ROOT"
MOVING = ("VCPU", "MEMORY_MB")


def _record(total: int) -> dict[str, Any]:
    # A Nova driver states the unit fields, not the ratios: those stay
    # the operator's.
    return {"total": total, "min_unit": 1, "max_unit": total, "step_size": 1}


class NovaStyleDriver:
    def __init__(self, config: dict[str, Any] | None = None) -> None:
        self.config = config or json.loads(os.environ["NOVA_STYLE_DRIVER"])

    def get_available_nodes(self, refresh: bool = False) -> list[str]:
        return list(self.config)

    def update_provider_tree(
        self, provider_tree: Any, nodename: str, allocations: Any = None
    ) -> None:
        node = self.config[nodename]
        root_inv = {}
        if not provider_tree.has_sharing_provider("DISK_GB"):
            root_inv["DISK_GB"] = _record(node["disk_gb"])
        cells = node.get("numa", 0)
        if not cells:
            root_inv["VCPU"] = _record(node["vcpus"])
            root_inv["MEMORY_MB"] = _record(node["memory_mb"])
            provider_tree.update_inventory(nodename, root_inv)
            return
        root = provider_tree.data(nodename)
        if any(rc in root.inventory for rc in MOVING) and allocations is None:
            raise ReshapeNeeded()
        cell_uuids = []
        for cell in range(cells):
            name = "%s_NUMA%d" % (nodename, cell)
            if not provider_tree.exists(name):
                provider_tree.new_child(name, nodename)
            provider_tree.update_inventory(
                name,
                {
                    "VCPU": _record(node["vcpus"] // cells),
                    "MEMORY_MB": _record(node["memory_mb"] // cells),
                },
            )
            provider_tree.update_traits(name, [NUMA_TRAIT])
            cell_uuids.append(provider_tree.data(name).uuid)
        if allocations is not None:
            self._move_to_cells(root.uuid, cell_uuids, provider_tree, allocations)
        provider_tree.update_inventory(nodename, root_inv)

    @staticmethod
    def _move_to_cells(root: str, cells: list[str], tree: Any, allocations: dict[str, Any]) -> None:
        """Each consumer's root CPU and memory go to the first cell with
        room for both."""
        free = {c: dict((rc, tree.data(c).inventory[rc]["total"]) for rc in MOVING) for c in cells}
        for consumer in sorted(allocations):
            by_rp = allocations[consumer]["allocations"]
            held = by_rp.get(root, {}).get("resources", {})
            want = {rc: held.pop(rc) for rc in MOVING if rc in held}
            if not want:
                continue
            if not held:
                del by_rp[root]
            cell = next(c for c in cells if all(free[c][rc] >= n for rc, n in want.items()))
            for rc, n in want.items():
                free[cell][rc] -= n
            by_rp.setdefault(cell, {"resources": {}})["resources"].update(want)
