"""What a ``ProviderTree`` hands out: a read-only copy of one provider
(:class:`ProviderData`, ``tree.data(...)``) and what differs between two
trees (:class:`TreeDiff`, ``old.compare(new)``). Both are public through
``berth.client`` and ``berth.client.provider_tree``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from berth.client.records import InventoryDict

__all__ = ["ProviderData", "TreeDiff"]


@dataclass(frozen=True)
class ProviderData:
    """A copy of one provider's state; changing it changes no tree.

    ``resources`` is what ``update_resources`` recorded (never sent to
    Placement)."""

    uuid: str
    name: str
    parent_uuid: str | None
    generation: int | None
    inventory: InventoryDict
    traits: frozenset[str]
    aggregates: frozenset[str]
    resources: dict[str, frozenset[Any]] = field(default_factory=dict)


@dataclass(frozen=True)
class TreeDiff:
    """What differs between two trees, as ``old.compare(new)`` sees it.

    ``added`` lists parents before children (the order to create them),
    ``removed`` children before parents (the order to delete them).
    The other fields list providers present in both trees whose name,
    parent, inventory (fields stated by the new tree only), traits or
    aggregates differ.
    """

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    renamed: tuple[str, ...] = ()
    inventory: tuple[str, ...] = ()
    traits: tuple[str, ...] = ()
    aggregates: tuple[str, ...] = ()
    reparented: tuple[str, ...] = ()

    @property
    def empty(self) -> bool:
        return not (
            self.added
            or self.removed
            or self.renamed
            or self.inventory
            or self.traits
            or self.aggregates
            or self.reparented
        )
