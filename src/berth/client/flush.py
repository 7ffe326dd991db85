"""Turning a TreeDiff into the fewest Placement calls.

Order matters: parents are created before children, and inventory (or
the reshape) is written before providers are deleted, so that a reshape
can move allocations off a provider that then goes away. Generations are
tracked call by call, starting from what the cache last saw.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from berth.client.http import RESHAPE_TYPED_VERSION, RESHAPE_VERSION, RP, rp_path
from berth.client.provider_tree import AllocationsDict, ProviderTree, TreeDiff

Call = Callable[..., Any]


def reshape_allocations(allocations: AllocationsDict
                        ) -> tuple[dict[str, Any], str]:
    """The ``allocations`` part of a reshaper body, and its microversion.

    Records are reduced to what ``POST /reshaper`` accepts: per provider
    only non-zero ``resources``. ``consumer_type`` is sent (at 1.38) only
    when every record has one, since 1.38 requires it for all.
    """
    typed = bool(allocations) and all("consumer_type" in rec
                                      for rec in allocations.values())
    body: dict[str, Any] = {}
    for consumer, rec in allocations.items():
        if "project_id" not in rec or "user_id" not in rec:
            raise ValueError("allocations of consumer %s lack project_id "
                             "or user_id" % consumer)
        by_rp = {}
        for rp, entry in rec.get("allocations", {}).items():
            resources = {rc: n for rc, n in entry.get("resources", {}).items()
                         if n}
            if resources:
                by_rp[rp] = {"resources": resources}
        item = {"allocations": by_rp, "project_id": rec["project_id"],
                "user_id": rec["user_id"],
                "consumer_generation": rec.get("consumer_generation")}
        if typed:
            item["consumer_type"] = rec["consumer_type"]
        body[consumer] = item
    return body, RESHAPE_TYPED_VERSION if typed else RESHAPE_VERSION


class Flush:
    """One run of ``update_from_provider_tree``: the calls and their
    effect on generations."""

    def __init__(self, call: Call, old: ProviderTree, new: ProviderTree,
                 current_generations: Callable[[list[str]], dict[str, int]]
                 ) -> None:
        self.call = call
        self.old = old
        self.new = new
        self.current_generations = current_generations
        self.gens: dict[str, int | None] = {
            u: old.data(u).generation for u in old.get_provider_uuids()}
        self.writes = 0

    def _write(self, method: str, path: str, body: Any = None,
               version: str | None = None, ok: tuple[int, ...] = (200,)
               ) -> Any:
        self.writes += 1
        if version is None:
            return self.call(method, path, body=body, ok=ok)
        return self.call(method, path, version, body=body, ok=ok)

    def run(self, diff: TreeDiff, allocations: AllocationsDict | None) -> None:
        # Shape the reshape body first: a malformed record must fail
        # before anything is written.
        prepared = (None if allocations is None
                    else reshape_allocations(allocations))
        for uuid in diff.added:
            self._create(uuid)
        for uuid in diff.renamed:
            self._rename(uuid)
        added = [self.new.data(u) for u in diff.added]
        inventory = list(diff.inventory) + [d.uuid for d in added
                                            if d.inventory]
        self._ensure_custom(inventory, "inventory", "/resource_classes/")
        if prepared is not None:
            self._reshape(inventory, *prepared)
        else:
            for uuid in inventory:
                self._put(uuid, "/inventories", "inventories",
                          self.new.data(uuid).inventory)
        traits = list(diff.traits) + [d.uuid for d in added if d.traits]
        self._ensure_custom(traits, "traits", "/traits/")
        for uuid in traits:
            self._put(uuid, "/traits", "traits",
                      sorted(self.new.data(uuid).traits))
        for uuid in list(diff.aggregates) + [d.uuid for d in added
                                             if d.aggregates]:
            self._put(uuid, "/aggregates", "aggregates",
                      sorted(self.new.data(uuid).aggregates))
        for uuid in diff.removed:
            self._write("DELETE", rp_path(uuid), ok=(204,))
            self.gens.pop(uuid, None)

    def _ensure_custom(self, uuids: list[str], attr: str, path: str) -> None:
        """Create the CUSTOM_ classes or traits the changed providers use
        and the old tree did not (those may be new to Placement)."""
        def names(tree: ProviderTree, among: list[str]) -> set[str]:
            return {n for u in among for n in getattr(tree.data(u), attr)}
        known = names(self.old, self.old.get_provider_uuids())
        for name in sorted(names(self.new, uuids) - known):
            if name.startswith("CUSTOM_"):
                self._write("PUT", path + name, version="1.7",
                            ok=(201, 204))

    def _create(self, uuid: str) -> None:
        data = self.new.data(uuid)
        row = self._write("POST", RP, {
            "uuid": uuid, "name": data.name,
            "parent_provider_uuid": data.parent_uuid})
        self.gens[uuid] = row["generation"]

    def _rename(self, uuid: str) -> None:
        data = self.new.data(uuid)
        row = self._write("PUT", rp_path(uuid), {
            "name": data.name, "parent_provider_uuid": data.parent_uuid})
        self.gens[uuid] = row["generation"]

    def _put(self, uuid: str, tail: str, key: str, value: Any) -> None:
        answer = self._write("PUT", rp_path(uuid, tail), {
            key: value, "resource_provider_generation": self.gens[uuid]})
        self.gens[uuid] = answer["resource_provider_generation"]

    def _reshape(self, changed: list[str], body_allocs: dict[str, Any],
                 version: str) -> None:
        # The reshaper wants at least one provider's inventory; when none
        # changed (only allocations move), restate the first root's.
        providers = changed or self.new.roots[:1]
        body = {"inventories": {
            u: {"inventories": self.new.data(u).inventory,
                "resource_provider_generation": self.gens[u]}
            for u in providers}, "allocations": body_allocs}
        self._write("POST", "/reshaper", body, version, ok=(204,))
        # 204 carries no generations; the reshape moved them all.
        self.gens.update(self.current_generations(self.new.roots))

    def result(self) -> ProviderTree:
        """The new tree with the generations Placement now has; the
        caller's tree is updated to match as well."""
        tree = self.new.snapshot()
        for uuid in tree.get_provider_uuids():
            gen = self.gens.get(uuid)
            tree.update_generation(uuid, gen)
            self.new.update_generation(uuid, gen)
        return tree
