"""``ProviderTree``: a thread-safe, in-memory model of provider trees.

A driver edits a ``ProviderTree`` to describe what its node looks like;
the report client compares it with the last state it saw in Placement and
sends only the differences. Providers are named by name or by uuid
wherever a method takes ``provider``. The methods and their meaning are
those of Nova's ``ProviderTree``, so a Nova driver's code runs unchanged.

Inventory records are kept as given. Comparisons look only at the fields
the newer record states: a driver that reports ``{"total": 8}`` has not
"changed" a record whose ``allocation_ratio`` an operator set, and the
report client writes the operator's value back untouched.

Names: a root's name is unique among roots, a child's name unique within
its own tree (as in Nova); uuids are unique across the whole tree. A name
lookup tries roots first, then each tree in order.
"""

from __future__ import annotations

import copy
import threading
import uuid as uuidlib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import os_traits

from berth.client.exceptions import ProviderNotInTree
from berth.client.records import (
    AllocationsDict,
    InventoryDict,
    checked_inventory,
    inventory_changed,
    merge_inventory,
    move_allocations,
    normalize_inventory,
)
from berth.client.tree_records import ProviderData, TreeDiff

__all__ = [
    "ProviderTree",
    "ProviderData",
    "TreeDiff",
    "normalize_inventory",
    "move_allocations",
    "inventory_changed",
    "merge_inventory",
    "SHARING_TRAIT",
    "AllocationsDict",
    "InventoryDict",
]

#: Marks a provider whose inventory serves the members of its aggregates.
SHARING_TRAIT: str = os_traits.MISC_SHARES_VIA_AGGREGATE


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
    resources: dict[str, set[Any]] = field(default_factory=dict)


class ProviderTree:
    """Providers (uuid, name, generation, parent) with their inventory,
    traits and aggregates. Every method is safe to call from any thread;
    ``copy.deepcopy(tree)`` is ``tree.snapshot()``."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._nodes: dict[str, _Node] = {}
        self._root_names: dict[str, str] = {}
        self._roots: list[str] = []

    # -- lookup ---------------------------------------------------------

    def _find(self, provider: str) -> _Node:
        node = self._nodes.get(provider)
        if node is None and provider in self._root_names:
            node = self._nodes[self._root_names[provider]]
        if node is None:
            for found in self._walk(self._roots):
                if found.name == provider:
                    return found
            raise ProviderNotInTree("no provider %r in the tree" % provider)
        return node

    def _root(self, node: _Node) -> _Node:
        while node.parent_uuid is not None:
            node = self._nodes[node.parent_uuid]
        return node

    def exists(self, provider: str) -> bool:
        """True when a provider with this name or uuid is in the tree."""
        with self._lock:
            try:
                self._find(provider)
            except ProviderNotInTree:
                return False
            return True

    def data(self, provider: str) -> ProviderData:
        """A copy of the provider's state (ProviderNotInTree if absent)."""
        with self._lock:
            n = self._find(provider)
            return ProviderData(
                n.uuid,
                n.name,
                n.parent_uuid,
                n.generation,
                copy.deepcopy(n.inventory),
                frozenset(n.traits),
                frozenset(n.aggregates),
                {rc: frozenset(v) for rc, v in n.resources.items()},
            )

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
            start = self._roots if provider is None else [self._find(provider).uuid]
            return [n.uuid for n in self._walk(start)]

    def get_provider_uuids_in_tree(self, provider: str) -> list[str]:
        """Uuids of the whole tree ``provider`` belongs to, parents first."""
        with self._lock:
            root = self._root(self._find(provider))
            return [n.uuid for n in self._walk([root.uuid])]

    def snapshot(self) -> ProviderTree:
        """A deep copy that shares nothing with this tree."""
        with self._lock:
            other = ProviderTree()
            other._nodes = copy.deepcopy(self._nodes)
            other._root_names = dict(self._root_names)
            other._roots = list(self._roots)
            return other

    def __deepcopy__(self, memo: dict[int, Any]) -> ProviderTree:
        return self.snapshot()

    # -- structure ------------------------------------------------------

    def _name_taken(self, name: str, parent: _Node | None, ignore: str | None = None) -> bool:
        """Whether ``name`` is used by another root (for a root) or by
        another provider of the tree it goes into; ``ignore`` is the
        provider being renamed."""
        if parent is None:
            if self._root_names.get(name, ignore) != ignore:
                return True
            if ignore is None:
                return False
            tree = ignore
        else:
            tree = self._root(parent).uuid
        return any(n.name == name and n.uuid != ignore for n in self._walk([tree]))

    def _add(
        self, name: str, uuid: str | None, parent: _Node | None, generation: int | None
    ) -> str:
        uuid = uuid or str(uuidlib.uuid4())
        if uuid in self._nodes or self._name_taken(name, parent):
            raise ProviderNotInTree(
                "a provider named %r or with uuid %s is already in the tree" % (name, uuid)
            )
        node = _Node(uuid, name, parent.uuid if parent else None, generation)
        self._nodes[uuid] = node
        if parent is None:
            self._root_names[name] = uuid
            self._roots.append(uuid)
        else:
            parent.children.append(uuid)
        return uuid

    def new_root(self, name: str, uuid: str | None = None, generation: int | None = None) -> str:
        """Add a root provider; return its uuid (generated if not given)."""
        with self._lock:
            return self._add(name, uuid, None, generation)

    def new_child(
        self, name: str, parent: str, uuid: str | None = None, generation: int | None = None
    ) -> str:
        """Add a child of ``parent``; return its uuid."""
        with self._lock:
            return self._add(name, uuid, self._find(parent), generation)

    def _unlink(self, node: _Node) -> None:
        if node.parent_uuid is None:
            self._roots.remove(node.uuid)
            del self._root_names[node.name]
        else:
            self._nodes[node.parent_uuid].children.remove(node.uuid)

    def remove(self, provider: str) -> None:
        """Remove the provider and all its descendants."""
        with self._lock:
            node = self._find(provider)
            for gone in list(self._walk([node.uuid])):
                del self._nodes[gone.uuid]
            self._unlink(node)

    def rename(self, provider: str, name: str) -> None:
        """Give the provider another (unused) name."""
        with self._lock:
            node = self._find(provider)
            parent = None if node.parent_uuid is None else self._nodes[node.parent_uuid]
            if self._name_taken(name, parent, ignore=node.uuid):
                raise ProviderNotInTree("name %r is taken" % name)
            if parent is None:
                del self._root_names[node.name]
                self._root_names[name] = node.uuid
            node.name = name

    def reparent(self, provider: str, parent: str | None) -> None:
        """Move the provider (with its descendants) under ``parent``, or
        make it a root (None). Flushed with microversion 1.37."""
        with self._lock:
            node = self._find(provider)
            target = None if parent is None else self._find(parent)
            moved = {n.uuid for n in self._walk([node.uuid])}
            if target is not None and target.uuid in moved:
                raise ProviderNotInTree("%s cannot move under itself or its descendant" % node.name)
            names = [n.name for n in self._walk([node.uuid])]
            if target is None:
                taken = node.name in self._root_names and (self._root_names[node.name] != node.uuid)
            else:
                tree = self._walk([self._root(target).uuid])
                taken = any(n.name in names and n.uuid not in moved for n in tree)
            if taken:
                raise ProviderNotInTree("a name under %s is taken at the destination" % node.name)
            self._unlink(node)
            node.parent_uuid = None if target is None else target.uuid
            if target is None:
                self._roots.append(node.uuid)
                self._root_names[node.name] = node.uuid
            else:
                target.children.append(node.uuid)

    def populate_from_iterable(self, providers: Iterable[Mapping[str, Any]]) -> None:
        """Add or replace providers from dicts shaped like Placement's
        (``uuid``, ``name``, ``generation``, ``parent_provider_uuid``;
        optionally ``inventories``, ``traits``, ``aggregates``).

        A provider already in the tree is replaced, its descendants
        dropped unless listed too; providers not listed are kept. Raises
        ProviderNotInTree when a parent is neither in the tree nor listed.
        """
        pending = {p["uuid"]: p for p in providers}
        with self._lock:
            missing = (
                {p.get("parent_provider_uuid") for p in pending.values()}
                - {None}
                - set(pending)
                - set(self._nodes)
            )
            if missing:
                raise ProviderNotInTree(
                    "parents not found: %s" % ", ".join(sorted(map(str, missing)))
                )
            while pending:
                uuid, row = next(
                    (u, r)
                    for u, r in pending.items()
                    if r.get("parent_provider_uuid") not in pending
                )
                del pending[uuid]
                if uuid in self._nodes:
                    self.remove(uuid)
                parent = row.get("parent_provider_uuid")
                self._add(
                    row["name"],
                    uuid,
                    None if parent is None else self._nodes[parent],
                    row.get("generation"),
                )
                node = self._nodes[uuid]
                node.inventory = checked_inventory(row.get("inventories", {}))
                node.traits = set(row.get("traits", ()))
                node.aggregates = set(row.get("aggregates", ()))

    def update_generation(self, provider: str, generation: int | None) -> None:
        """Record the provider generation Placement last reported."""
        with self._lock:
            self._find(provider).generation = generation

    # -- inventory ------------------------------------------------------

    def has_inventory(self, provider: str) -> bool:
        """True when the provider has any inventory record."""
        with self._lock:
            return bool(self._find(provider).inventory)

    def has_inventory_changed(
        self, provider: str, inventory: Mapping[str, Mapping[str, Any]]
    ) -> bool:
        """True when ``inventory`` adds or drops a class or states a field
        with another value (fields it leaves out are not compared)."""
        with self._lock:
            return inventory_changed(self._find(provider).inventory, checked_inventory(inventory))

    def update_inventory(
        self,
        provider: str,
        inventory: Mapping[str, Mapping[str, Any]],
        generation: int | None = None,
    ) -> bool:
        """Replace the provider's inventory if it changed (see
        :meth:`has_inventory_changed`); True if it did. An unchanged
        inventory keeps the fuller records it had.

        ``generation``, when given, is recorded as the provider generation.
        """
        new = checked_inventory(inventory)
        with self._lock:
            node = self._find(provider)
            if generation is not None:
                node.generation = generation
            if not inventory_changed(node.inventory, new):
                return False
            node.inventory = new
            return True

    def move_inventory(
        self, source: str, target: str, resource_class: str, record: Mapping[str, Any] | None = None
    ) -> None:
        """Move one class of inventory from ``source`` to ``target``.

        ``record`` replaces the moved record (for example a smaller total
        when inventory is split between several targets). Allocations do
        not move with it: see :func:`move_allocations`.
        """
        with self._lock:
            src, dst = self._find(source), self._find(target)
            if resource_class not in src.inventory:
                raise ProviderNotInTree("%s has no %s inventory" % (src.name, resource_class))
            moved = src.inventory.pop(resource_class)
            if record is not None:
                moved = checked_inventory({resource_class: record})[resource_class]
            dst.inventory[resource_class] = moved

    def has_sharing_provider(self, resource_class: str) -> bool:
        """True when a provider in the tree shares ``resource_class``
        (has inventory of it and the MISC_SHARES_VIA_AGGREGATE trait)."""
        with self._lock:
            return any(
                resource_class in n.inventory and SHARING_TRAIT in n.traits
                for n in self._walk(self._roots)
            )

    def update_resources(self, provider: str, resources: Mapping[str, Iterable[Any]]) -> bool:
        """Record the driver's assignable resources by class (kept only
        in the tree, never sent to Placement); True if they changed."""
        new = {rc: set(items) for rc, items in resources.items()}
        with self._lock:
            node = self._find(provider)
            if node.resources == new:
                return False
            node.resources = new
            return True

    # -- traits and aggregates -----------------------------------------

    def _set(self, provider: str, attr: str, values: Iterable[str], generation: int | None) -> bool:
        with self._lock:
            node = self._find(provider)
            if generation is not None:
                node.generation = generation
            new = set(values)
            changed: bool = getattr(node, attr) != new
            setattr(node, attr, new)
            return changed

    def _differs(self, provider: str, attr: str, values: Iterable[str]) -> bool:
        with self._lock:
            return bool(getattr(self._find(provider), attr) != set(values))

    def _has_all(self, provider: str, attr: str, values: Iterable[str]) -> bool:
        with self._lock:
            have: set[str] = getattr(self._find(provider), attr)
            return set(values) <= have

    def has_traits(self, provider: str, traits: Iterable[str]) -> bool:
        """True when the provider has every one of ``traits``."""
        return self._has_all(provider, "traits", traits)

    def have_traits_changed(self, provider: str, traits: Iterable[str]) -> bool:
        """True when ``traits`` is not exactly the provider's traits."""
        return self._differs(provider, "traits", traits)

    def update_traits(
        self, provider: str, traits: Iterable[str], generation: int | None = None
    ) -> bool:
        """Replace the provider's traits; True if they changed."""
        return self._set(provider, "traits", traits, generation)

    def _edit(self, provider: str, attr: str, add: bool, values: tuple[str, ...]) -> None:
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

    def in_aggregates(self, provider: str, aggregates: Iterable[str]) -> bool:
        """True when the provider is in every one of ``aggregates``."""
        return self._has_all(provider, "aggregates", aggregates)

    def have_aggregates_changed(self, provider: str, aggregates: Iterable[str]) -> bool:
        """True when ``aggregates`` is not exactly the provider's."""
        return self._differs(provider, "aggregates", aggregates)

    def update_aggregates(
        self, provider: str, aggregates: Iterable[str], generation: int | None = None
    ) -> bool:
        """Replace the provider's aggregates; True if they changed."""
        return self._set(provider, "aggregates", aggregates, generation)

    # Nova's ProviderTree has these two beside update_aggregates, and a
    # virt driver's update_provider_tree may call them.
    def add_aggregates(self, provider: str, *aggregates: str) -> None:
        """Put the provider in ``aggregates`` too, keeping the others."""
        self._edit(provider, "aggregates", True, aggregates)

    def remove_aggregates(self, provider: str, *aggregates: str) -> None:
        """Take the provider out of ``aggregates``, keeping the others."""
        self._edit(provider, "aggregates", False, aggregates)

    # -- comparison -----------------------------------------------------

    def compare(self, other: ProviderTree) -> TreeDiff:
        """What must change to turn this tree into ``other``."""
        mine, theirs = self.snapshot(), other.snapshot()
        old, new = mine._nodes, theirs._nodes
        added = [u for u in theirs.get_provider_uuids() if u not in old]
        removed = [u for u in reversed(mine.get_provider_uuids()) if u not in new]
        both = [u for u in theirs.get_provider_uuids() if u in old]
        return TreeDiff(
            added=tuple(added),
            removed=tuple(removed),
            renamed=tuple(u for u in both if old[u].name != new[u].name),
            inventory=tuple(
                u for u in both if inventory_changed(old[u].inventory, new[u].inventory)
            ),
            traits=tuple(u for u in both if old[u].traits != new[u].traits),
            aggregates=tuple(u for u in both if old[u].aggregates != new[u].aggregates),
            reparented=tuple(u for u in both if old[u].parent_uuid != new[u].parent_uuid),
        )
