"""Domain errors. Each carries its message; api/errors.py maps the class to
an HTTP status and a stable Placement error code in one table."""

from __future__ import annotations


class DomainError(Exception):
    """Base of every error the domain layer raises on purpose."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadRequest(DomainError):
    """The request is well-formed but asks for something invalid."""


class QueryBadValue(BadRequest):
    """A query parameter has a value that is not allowed."""


class QueryMissingValue(BadRequest):
    """A query parameter needs a companion value that is missing."""


class QueryDuplicateKey(BadRequest):
    """A query parameter was given twice where only one is allowed."""


class NotFound(DomainError):
    """A named thing does not exist."""


class ProviderNotFoundForWrite(BadRequest):
    """A write names a resource provider that does not exist."""


class Forbidden(DomainError):
    """Policy does not allow the caller to do this."""


class Conflict(DomainError):
    """The request conflicts with the current state (generic 409)."""


class ConcurrentUpdate(Conflict):
    """A generation changed under the caller: refresh and retry."""


class DuplicateName(Conflict):
    """A name or uuid that must be unique is taken."""


class InventoryInUse(Conflict):
    """An inventory change would strand existing allocations."""


class ProviderInUse(Conflict):
    """A provider with allocations cannot be deleted."""


class CannotDeleteParent(Conflict):
    """A provider with children cannot be deleted."""


class ProviderNotFoundConflict(Conflict):
    """A provider named in a write vanished (409 with a code)."""


class CapacityExceeded(Conflict):
    """An allocation does not fit the provider's inventory."""


class UnknownResourceClass(BadRequest):
    """An allocation names a resource class that does not exist."""


class ClaimedProviderDeleted(ConcurrentUpdate):
    """A provider a claim was about to lock was deleted after the claim
    read it (409 ``placement.concurrent_update``, upstream's "another
    thread" wording; ``allocation.run_claim`` runs the write again)."""


class ProviderNotFoundInBody(BadRequest):
    """A body names a provider that does not exist (400 with the
    resource_provider.not_found code; the reshaper's inventories)."""


class HistoryGone(DomainError):
    """The change feed no longer keeps the events after the position
    asked for, or never wrote them (a position ahead of the database):
    410; ``oldest`` is the oldest position it can read on from."""

    def __init__(self, message: str, oldest: str) -> None:
        super().__init__(message)
        self.oldest = oldest
