"""``ProviderTree``: a thread-safe, in-memory model of provider trees.

A driver edits a ``ProviderTree`` to describe what its node looks like;
the report client compares it with the last state it saw in Placement and
sends only the differences. Providers are named by name or by uuid
wherever a method takes ``provider``.

Inventory records are kept normalised (every field present, Placement's
defaults filled in) so that ``{"total": 8}`` and the full record Placement
returns compare equal.
"""

from __future__ import annotations

import copy
import threading
import uuid as uuidlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from berth.client.exceptions import ProviderNotInTree
from berth.domain.capacity import Inventory

__all__ = ["ProviderTree", "ProviderData", "TreeDiff", "normalize_inventory",
           "move_allocations"]

InventoryDict = dict[str, dict[str, Any]]
#: ``{consumer_uuid: {"allocations": {rp_uuid: {"resources": {...}}}, ...}}``
AllocationsDict = dict[str, dict[str, Any]]


def normalize_inventory(inventory: Mapping[str, Mapping[str, Any]]
                        ) -> InventoryDict:
    """Every record completed with Placement's defaults.

    Raises ValueError for a record without ``total`` or with a field
    Placement does not know.
    """
    result: InventoryDict = {}
    for rc, record in inventory.items():
        try:
            full = Inventory(**record)
        except TypeError as exc:
            raise ValueError("bad inventory record for %s: %s"
                             % (rc, exc)) from None
        result[rc] = full._asdict()
    return result


@dataclass
class _Node:
    uuid: str
    name: str
    parent_uuid: str | None
    generation: int | None = None
    inventory: InventoryDict = field(default_factory=dict)
    traits: set[str] = field(default_factory=set)
    aggregates: set[str] = field(default_factory=set)
    children: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class ProviderData:
    """A copy of one provider's state; changing it changes no tree."""

    uuid: str
    name: str
    parent_uuid: str | None
    generation: int | None
    inventory: InventoryDict
    traits: frozenset[str]
    aggregates: frozenset[str]


@dataclass(frozen=True)
class TreeDiff:
    """What differs between two trees, as ``old.compare(new)`` sees it.

    ``added`` lists parents before children (the order to create them),
    ``removed`` children before parents (the order to delete them).
    The other fields list providers present in both trees whose name,
    inventory, traits or aggregates differ.
    """

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    renamed: tuple[str, ...] = ()
    inventory: tuple[str, ...] = ()
    traits: tuple[str, ...] = ()
    aggregates: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.renamed
                    or self.inventory or self.traits or self.aggregates)


class ProviderTree:
    """Providers (uuid, name, generation, parent) with their inventory,
    traits and aggregates. Every method is safe to call from any thread."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._nodes: dict[str, _Node] = {}
        self._names: dict[str, str] = {}
        self._roots: list[str] = []

    # -- lookup ---------------------------------------------------------

    def _find(self, provider: str) -> _Node:
        node = self._nodes.get(provider)
        if node is None and provider in self._names:
            node = self._nodes[self._names[provider]]
        if node is None:
            raise ProviderNotInTree("no provider %r in the tree" % provider)
        return node

    def exists(self, provider: str) -> bool:
        """True when a provider with this name or uuid is in the tree."""
        with self._lock:
            return provider in self._nodes or provider in self._names

    def data(self, provider: str) -> ProviderData:
        """A copy of the provider's state (ProviderNotInTree if absent)."""
        with self._lock:
            n = self._find(provider)
            return ProviderData(n.uuid, n.name, n.parent_uuid, n.generation,
                                copy.deepcopy(n.inventory),
                                frozenset(n.traits), frozenset(n.aggregates))

    @property
    def roots(self) -> list[str]:
        """Uuids of the root providers, in the order they were added."""
        with self._lock:
            return list(self._roots)

    def _walk(self, start: Iterable[str]) -> Iterator[_Node]:
        for uuid in start:
            node = self._nodes[uuid]
            yield node
            yield from self._walk(node.children)

    def get_provider_uuids(self, provider: str | None = None) -> list[str]:
        """Uuids of ``provider``'s subtree (default: every tree), parents
        before children."""
        with self._lock:
            start = self._roots if provider is None else [
                self._find(provider).uuid]
            return [n.uuid for n in self._walk(start)]

    def snapshot(self) -> ProviderTree:
        """A deep copy that shares nothing with this tree."""
        with self._lock:
            other = ProviderTree()
            other._nodes = copy.deepcopy(self._nodes)
            other._names = dict(self._names)
            other._roots = list(self._roots)
            return other

    # -- structure ------------------------------------------------------

    def _add(self, name: str, uuid: str | None, parent: _Node | None,
             generation: int | None) -> str:
        uuid = uuid or str(uuidlib.uuid4())
        if uuid in self._nodes or name in self._names:
            raise ProviderNotInTree("a provider named %r or with uuid %s is "
                                    "already in the tree" % (name, uuid))
        node = _Node(uuid, name, parent.uuid if parent else None, generation)
        self._nodes[uuid] = node
        self._names[name] = uuid
        if parent is None:
            self._roots.append(uuid)
        else:
            parent.children.append(uuid)
        return uuid

    def new_root(self, name: str, uuid: str | None = None,
                 generation: int | None = None) -> str:
        """Add a root provider; return its uuid (generated if not given)."""
        with self._lock:
            return self._add(name, uuid, None, generation)

    def new_child(self, name: str, parent: str, uuid: str | None = None,
                  generation: int | None = None) -> str:
        """Add a child of ``parent``; return its uuid."""
        with self._lock:
            return self._add(name, uuid, self._find(parent), generation)

    def remove(self, provider: str) -> None:
        """Remove the provider and all its descendants."""
        with self._lock:
            node = self._find(provider)
            for gone in list(self._walk([node.uuid])):
                del self._nodes[gone.uuid]
                del self._names[gone.name]
            if node.parent_uuid is None:
                self._roots.remove(node.uuid)
            else:
                self._nodes[node.parent_uuid].children.remove(node.uuid)

    def rename(self, provider: str, name: str) -> None:
        """Give the provider another (unused) name."""
        with self._lock:
            node = self._find(provider)
            if name in self._names and self._names[name] != node.uuid:
                raise ProviderNotInTree("name %r is taken" % name)
            del self._names[node.name]
            node.name = name
            self._names[name] = node.uuid

    def update_generation(self, provider: str, generation: int | None) -> None:
        """Record the provider generation Placement last reported."""
        with self._lock:
            self._find(provider).generation = generation

    # -- inventory ------------------------------------------------------

    def has_inventory_changed(self, provider: str,
                              inventory: Mapping[str, Mapping[str, Any]]
                              ) -> bool:
        """True when ``inventory`` differs from the provider's."""
        with self._lock:
            return self._find(provider).inventory != normalize_inventory(
                inventory)

    def update_inventory(self, provider: str,
                         inventory: Mapping[str, Mapping[str, Any]],
                         generation: int | None = None) -> bool:
        """Replace the provider's whole inventory; True if it changed.

        ``generation``, when given, is recorded as the provider generation.
        """
        new = normalize_inventory(inventory)
        with self._lock:
            node = self._find(provider)
            if generation is not None:
                node.generation = generation
            changed = node.inventory != new
            node.inventory = new
            return changed

    def move_inventory(self, source: str, target: str, resource_class: str,
                       record: Mapping[str, Any] | None = None) -> None:
        """Move one class of inventory from ``source`` to ``target``.

        ``record`` replaces the moved record (for example a smaller total
        when inventory is split between several targets). Allocations do
        not move with it: see :func:`move_allocations`.
        """
        with self._lock:
            src, dst = self._find(source), self._find(target)
            if resource_class not in src.inventory:
                raise ProviderNotInTree("%s has no %s inventory"
                                        % (src.name, resource_class))
            moved = src.inventory.pop(resource_class)
            if record is not None:
                moved = normalize_inventory({resource_class: record})[
                    resource_class]
            dst.inventory[resource_class] = moved

    # -- traits and aggregates -----------------------------------------

    def _set(self, provider: str, attr: str, values: Iterable[str],
             generation: int | None) -> bool:
        with self._lock:
            node = self._find(provider)
            if generation is not None:
                node.generation = generation
            new = set(values)
            changed: bool = getattr(node, attr) != new
            setattr(node, attr, new)
            return changed

    def has_traits(self, provider: str, traits: Iterable[str]) -> bool:
        """True when the provider has every one of ``traits``."""
        with self._lock:
            return set(traits) <= self._find(provider).traits

    def update_traits(self, provider: str, traits: Iterable[str],
                      generation: int | None = None) -> bool:
        """Replace the provider's traits; True if they changed."""
        return self._set(provider, "traits", traits, generation)

    def _edit(self, provider: str, attr: str, add: bool,
              values: tuple[str, ...]) -> None:
        with self._lock:
            current: set[str] = getattr(self._find(provider), attr)
            if add:
                current.update(values)
            else:
                current.difference_update(values)

    def add_traits(self, provider: str, *traits: str) -> None:
        self._edit(provider, "traits", True, traits)

    def remove_traits(self, provider: str, *traits: str) -> None:
        self._edit(provider, "traits", False, traits)

    def update_aggregates(self, provider: str, aggregates: Iterable[str],
                          generation: int | None = None) -> bool:
        """Replace the provider's aggregates; True if they changed."""
        return self._set(provider, "aggregates", aggregates, generation)

    def add_aggregates(self, provider: str, *aggregates: str) -> None:
        self._edit(provider, "aggregates", True, aggregates)

    def remove_aggregates(self, provider: str, *aggregates: str) -> None:
        self._edit(provider, "aggregates", False, aggregates)

    # -- comparison -----------------------------------------------------

    def compare(self, other: ProviderTree) -> TreeDiff:
        """What must change to turn this tree into ``other``."""
        mine, theirs = self.snapshot(), other.snapshot()
        old, new = mine._nodes, theirs._nodes
        added = [u for u in theirs.get_provider_uuids() if u not in old]
        removed = [u for u in reversed(mine.get_provider_uuids())
                   if u not in new]
        both = [u for u in theirs.get_provider_uuids() if u in old]
        return TreeDiff(
            added=tuple(added), removed=tuple(removed),
            renamed=tuple(u for u in both if old[u].name != new[u].name),
            inventory=tuple(u for u in both
                            if old[u].inventory != new[u].inventory),
            traits=tuple(u for u in both if old[u].traits != new[u].traits),
            aggregates=tuple(u for u in both
                             if old[u].aggregates != new[u].aggregates))


def move_allocations(allocations: AllocationsDict, source: str, target: str,
                     resource_class: str, amount: int | None = None,
                     consumers: Iterable[str] | None = None) -> int:
    """Move allocations of ``resource_class`` from provider ``source`` to
    ``target``, editing ``allocations`` in place (the shape of
    ``get_allocations_for_provider_tree``).

    ``amount`` caps what moves per consumer (default: all of it);
    ``consumers`` limits which consumers move. Returns the total moved.
    """
    total = 0
    for cuuid in list(consumers) if consumers is not None else list(allocations):
        by_rp = allocations.get(cuuid, {}).get("allocations", {})
        resources = by_rp.get(source, {}).get("resources", {})
        have = resources.get(resource_class, 0)
        move = have if amount is None else min(amount, have)
        if move <= 0:
            continue
        if move == have:
            del resources[resource_class]
        else:
            resources[resource_class] = have - move
        if not resources:
            del by_rp[source]
        dest = by_rp.setdefault(target, {}).setdefault("resources", {})
        dest[resource_class] = dest.get(resource_class, 0) + move
        total += move
    return total
