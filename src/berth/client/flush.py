"""Turning a TreeDiff into the fewest Placement calls.

Order matters: parents are created before children, providers are
re-parented before their old parent may be deleted, and inventory (or the
reshape) is written before providers are deleted, so that a reshape can
move allocations off a provider that then goes away. Generations are
tracked call by call, starting from what the cache last saw.

Inventory writes carry the whole record Placement has with the fields the
driver stated laid over it, so fields it leaves out (an operator's
``allocation_ratio`` or ``reserved``) keep their value.

A reshape is made as atomic as the API allows: the providers it needs are
created first, then one ``POST /reshaper`` writes every inventory change,
the removed providers' (emptied) inventories and the allocations. If any
of that fails, the providers created for it are deleted again. Renames,
re-parenting, traits, aggregates and deletions follow only after the
reshape succeeded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from berth.client.exceptions import PlacementAPIError
from berth.client.http import (
    REPARENT_VERSION,
    RESHAPE_TYPED_VERSION,
    RESHAPE_VERSION,
    RP,
    rp_path,
)
from berth.client.provider_tree import ProviderTree, TreeDiff
from berth.client.records import AllocationsDict, InventoryDict, merge_inventory

LOG = logging.getLogger(__name__)

Call = Callable[..., Any]


def reshape_allocations(allocations: AllocationsDict) -> tuple[dict[str, Any], str]:
    """The ``allocations`` part of a reshaper body, and its microversion.

    Records are reduced to what ``POST /reshaper`` accepts: per provider
    only non-zero ``resources``. ``consumer_type`` is sent (at 1.38) only
    when every record has one, since 1.38 requires it for all.
    """
    typed = bool(allocations) and all("consumer_type" in rec for rec in allocations.values())
    body: dict[str, Any] = {}
    for consumer, rec in allocations.items():
        if "project_id" not in rec or "user_id" not in rec:
            raise ValueError("allocations of consumer %s lack project_id or user_id" % consumer)
        by_rp = {}
        for rp, entry in rec.get("allocations", {}).items():
            resources = {rc: n for rc, n in entry.get("resources", {}).items() if n}
            if resources:
                by_rp[rp] = {"resources": resources}
        item = {
            "allocations": by_rp,
            "project_id": rec["project_id"],
            "user_id": rec["user_id"],
            "consumer_generation": rec.get("consumer_generation"),
        }
        if typed:
            item["consumer_type"] = rec["consumer_type"]
        body[consumer] = item
    return body, RESHAPE_TYPED_VERSION if typed else RESHAPE_VERSION


class Flush:
    """One run of ``update_from_provider_tree``: the calls and their
    effect on generations."""

    def __init__(
        self,
        call: Call,
        old: ProviderTree,
        new: ProviderTree,
        current_generations: Callable[[list[str]], dict[str, int]],
    ) -> None:
        self.call = call
        self.old = old
        self.new = new
        self.current_generations = current_generations
        self.gens: dict[str, int | None] = {
            u: old.data(u).generation for u in old.get_provider_uuids()
        }
        self.old_uuids = frozenset(self.gens)
        self.writes = 0
        #: Providers this run created, parents first.
        self.created: list[str] = []
        #: Providers a failed reshape created whose deletion failed too.
        self.left_behind: list[str] = []
        self.reshaped = False

    def _write(
        self,
        method: str,
        path: str,
        body: Any = None,
        version: str | None = None,
        ok: tuple[int, ...] = (200,),
    ) -> Any:
        self.writes += 1
        if version is None:
            return self.call(method, path, body=body, ok=ok)
        return self.call(method, path, version, body=body, ok=ok)

    def final_inventory(self, uuid: str) -> InventoryDict:
        """What Placement should hold for ``uuid``: the cached records
        with the fields the new tree states laid over them."""
        current = self.old.data(uuid).inventory if uuid in self.old_uuids else {}
        return merge_inventory(current, self.new.data(uuid).inventory)

    def run(self, diff: TreeDiff, allocations: AllocationsDict | None) -> None:
        # Shape the reshape body and check the service first: a malformed
        # record or an impossible re-parent must fail before any write.
        prepared = None if allocations is None else reshape_allocations(allocations)
        if diff.reparented:
            self._check_reparent_supported(diff.reparented)
        added = [self.new.data(u) for u in diff.added]
        inventory = list(diff.inventory) + [d.uuid for d in added if d.inventory]
        if prepared is None:
            for uuid in diff.added:
                self._create(uuid)
            self._update_providers(diff)
            self._ensure_custom(inventory, "inventory", "/resource_classes/")
            for uuid in inventory:
                self._put(uuid, "/inventories", "inventories", self.final_inventory(uuid))
        else:
            try:
                for uuid in diff.added:
                    self._create(uuid)
                self._ensure_custom(inventory, "inventory", "/resource_classes/")
                self._reshape(inventory, list(diff.removed), *prepared)
            except PlacementAPIError:
                self._undo_created()
                raise
            self._update_providers(diff)
        traits = list(diff.traits) + [d.uuid for d in added if d.traits]
        self._ensure_custom(traits, "traits", "/traits/")
        for uuid in traits:
            self._put(uuid, "/traits", "traits", sorted(self.new.data(uuid).traits))
        for uuid in list(diff.aggregates) + [d.uuid for d in added if d.aggregates]:
            self._put(uuid, "/aggregates", "aggregates", sorted(self.new.data(uuid).aggregates))
        for uuid in diff.removed:
            self._write("DELETE", rp_path(uuid), ok=(204,))
            self.gens.pop(uuid, None)

    def _check_reparent_supported(self, uuids: tuple[str, ...]) -> None:
        root = self.call("GET", "/")
        newest = max(
            (v.get("max_version", "1.0") for v in root.get("versions", [])),
            key=_version_key,
            default="1.0",
        )
        if _version_key(newest) < _version_key(REPARENT_VERSION):
            raise ValueError(
                "cannot move provider(s) %s to another parent: that needs "
                "placement microversion %s and the service supports only "
                "up to %s; nothing was written" % (", ".join(uuids), REPARENT_VERSION, newest)
            )

    def _undo_created(self) -> None:
        """Delete what this run created (children first); what cannot be
        deleted is logged and listed in ``left_behind``."""
        for uuid in reversed(self.created):
            try:
                self.call("DELETE", rp_path(uuid), ok=(204, 404))
            except PlacementAPIError as exc:
                LOG.error(
                    "could not delete provider %s created for a failed reshape: %s", uuid, exc
                )
                self.left_behind.append(uuid)
            self.gens.pop(uuid, None)
        self.created = []

    def _ensure_custom(self, uuids: list[str], attr: str, path: str) -> None:
        """Create the CUSTOM_ classes or traits the changed providers use
        and the old tree did not (those may be new to Placement)."""

        def names(tree: ProviderTree, among: list[str]) -> set[str]:
            return {n for u in among for n in getattr(tree.data(u), attr)}

        known = names(self.old, self.old.get_provider_uuids())
        for name in sorted(names(self.new, uuids) - known):
            if name.startswith("CUSTOM_"):
                self._write("PUT", path + name, version="1.7", ok=(201, 204))

    def _create(self, uuid: str) -> None:
        data = self.new.data(uuid)
        row = self._write(
            "POST", RP, {"uuid": uuid, "name": data.name, "parent_provider_uuid": data.parent_uuid}
        )
        self.created.append(uuid)
        self.gens[uuid] = row["generation"]

    def _update_providers(self, diff: TreeDiff) -> None:
        """Renames and re-parents, one PUT per provider (1.37 for a move,
        parents before children)."""
        moved = set(diff.reparented)
        for uuid in self.new.get_provider_uuids():
            if uuid not in moved and uuid not in diff.renamed:
                continue
            data = self.new.data(uuid)
            row = self._write(
                "PUT",
                rp_path(uuid),
                {"name": data.name, "parent_provider_uuid": data.parent_uuid},
                REPARENT_VERSION if uuid in moved else None,
            )
            self.gens[uuid] = row["generation"]

    def _put(self, uuid: str, tail: str, key: str, value: Any) -> None:
        answer = self._write(
            "PUT",
            rp_path(uuid, tail),
            {key: value, "resource_provider_generation": self.gens[uuid]},
        )
        self.gens[uuid] = answer["resource_provider_generation"]

    def _reshape(
        self, changed: list[str], removed: list[str], body_allocs: dict[str, Any], version: str
    ) -> None:
        # Removed providers are emptied by the reshape itself (and deleted
        # only after it succeeded), so no allocation can land on them in
        # between. The reshaper wants at least one provider's inventory;
        # when none changed (only allocations move), restate the first
        # root's.
        inventories = {
            u: {
                "inventories": self.final_inventory(u),
                "resource_provider_generation": self.gens[u],
            }
            for u in changed or self.new.roots[:1]
        }
        for uuid in removed:
            inventories[uuid] = {"inventories": {}, "resource_provider_generation": self.gens[uuid]}
        body = {"inventories": inventories, "allocations": body_allocs}
        self._write("POST", "/reshaper", body, version, ok=(204,))
        self.reshaped = True
        # 204 carries no generations; the reshape moved them all.
        self.gens.update(self.current_generations(self.new.roots))

    def result(self) -> ProviderTree:
        """The new tree with the generations and inventory records
        Placement now has; the caller's tree gets the generations too."""
        tree = self.new.snapshot()
        for uuid in tree.get_provider_uuids():
            gen = self.gens.get(uuid)
            tree.update_generation(uuid, gen)
            self.new.update_generation(uuid, gen)
            # Clear first: update_inventory keeps a record that states
            # nothing new, and the cache must hold the fuller one.
            final = self.final_inventory(uuid)
            tree.update_inventory(uuid, {})
            tree.update_inventory(uuid, final)
        return tree


def _version_key(version: str) -> tuple[int, int]:
    major, _, minor = version.partition(".")
    return int(major), int(minor or 0)
