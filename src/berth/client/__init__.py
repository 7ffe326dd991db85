"""Berth's typed client library for drivers and tools.

* :class:`ProviderTree` -- an in-memory, thread-safe model of provider
  trees with inventory, traits and aggregates.
* :class:`ReportClient` -- reads trees and allocations from Placement and
  flushes a changed tree back with the fewest calls (or one reshape).
* The exceptions, described together in :mod:`berth.client.exceptions`.

Names listed in ``__all__`` are the public surface; a test pins them.
"""

from __future__ import annotations

from berth.client.exceptions import (
    AllocationUpdateFailed,
    PlacementAPIError,
    PlacementError,
    ProviderNotInTree,
    ReshapeFailed,
    ReshapeNeeded,
    ResourceProviderUpdateFailed,
)
from berth.client.provider_tree import (
    ProviderData,
    ProviderTree,
    TreeDiff,
    move_allocations,
    normalize_inventory,
)
from berth.client.report import ReportClient

__all__ = [
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
