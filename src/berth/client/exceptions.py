"""Exceptions raised by :mod:`berth.client`.

The whole tree, in one place::

    PlacementError                    base of everything below
    ├── PlacementAPIError             the service answered with an unexpected
    │                                 status; carries ``status``, ``code``
    │                                 (the Placement error code, or None),
    │                                 ``detail``, ``method`` and ``url``
    ├── ProviderNotInTree             (also a ValueError) a ProviderTree
    │                                 operation named a provider that is
    │                                 not in the tree, or the name/uuid is
    │                                 already taken by another provider
    ├── ReshapeNeeded                 raised by a driver's
    │                                 ``update_provider_tree`` when called
    │                                 without allocations and it must move
    │                                 inventory that may have allocations
    ├── ResourceProviderUpdateFailed  ``update_from_provider_tree`` could not
    │   │                         make the service match the tree; the
    │   │                         client's cache has been refreshed, so
    │   │                         calling again starts from the truth;
    │   │                         ``cause`` is the PlacementAPIError;
    │   │                         ``is_conflict``: retrying may succeed
    │   └── ReshapeFailed         the reshape failed: the ``POST /reshaper``
    │                             was rejected (it changed nothing; the
    │                             providers created for it were deleted
    │                             again), or a driver asked for a reshape
    │                             a second time
    └── AllocationUpdateFailed    a ReportClient allocation call (claim,
                                  move, remove, delete) gave up: a consumer
                                  generation conflict it must not retry,
                                  or conflicts beyond its retries;
                                  ``consumer`` and ``cause``

``PlacementAPIError.is_conflict`` tells a generation conflict
(``placement.concurrent_update``: refresh and retry) from other errors.
"""

from __future__ import annotations

from berth.domain.limits import CONCURRENT_UPDATE

__all__ = [
    "PlacementError",
    "PlacementAPIError",
    "ProviderNotInTree",
    "ReshapeNeeded",
    "ResourceProviderUpdateFailed",
    "ReshapeFailed",
    "AllocationUpdateFailed",
]


class PlacementError(Exception):
    """Base of every exception this client library raises."""


class PlacementAPIError(PlacementError):
    """The service answered a request with an unexpected status."""

    def __init__(
        self, method: str, url: str, status: int, detail: str = "", code: str | None = None
    ) -> None:
        super().__init__("%s %s answered %d: %s" % (method, url, status, detail or "(no detail)"))
        self.method = method
        self.url = url
        self.status = status
        self.detail = detail
        self.code = code

    @property
    def is_conflict(self) -> bool:
        """True for a generation conflict: refresh, recompute, retry."""
        return self.status == 409 and self.code == CONCURRENT_UPDATE


class ProviderNotInTree(PlacementError, ValueError):
    """A ProviderTree operation named an unknown (or a taken) provider."""


class ReshapeNeeded(PlacementError):
    """A driver must move inventory (and its allocations) between providers.

    Raised by ``update_provider_tree(tree, nodename)`` when called without
    ``allocations``; the agent then fetches the allocations and calls the
    driver again (only at start-up; see :mod:`berth.client.agent`).
    """


class ResourceProviderUpdateFailed(PlacementError):
    """Flushing a ProviderTree to the service failed part-way or entirely.

    Calls made before the failure stay made (each is its own transaction),
    except that a reshape is all-or-nothing. The report client's cache has
    been refreshed from the service before this is raised.
    """

    def __init__(self, message: str, cause: PlacementAPIError | None = None) -> None:
        super().__init__(message)
        self.cause = cause

    @property
    def is_conflict(self) -> bool:
        """True when a generation conflict caused it: refresh and retry."""
        return self.cause is not None and self.cause.is_conflict


class ReshapeFailed(ResourceProviderUpdateFailed):
    """A reshape failed. Either ``POST /reshaper`` was rejected (it
    changed nothing, and the providers created for it were deleted again)
    or the driver raised ``ReshapeNeeded`` although it had the allocations.
    """


class AllocationUpdateFailed(PlacementError):
    """A ReportClient allocation call could not write a consumer's
    allocations; nothing of that call was written."""

    def __init__(self, consumer: str, message: str, cause: PlacementAPIError | None = None) -> None:
        super().__init__("allocations of consumer %s: %s" % (consumer, message))
        self.consumer = consumer
        self.cause = cause
