"""Reading Berth's or Nova's arguments for the ReportClient methods both
have: Nova's take a leading request ``context`` (ignored here)."""

from __future__ import annotations

from typing import Any

from berth.client.provider_tree import AllocationsDict, ProviderTree

__all__ = ["ensure_root_args", "flush_args"]


def ensure_root_args(
    args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[str, str | None, str | None]:
    """(name, uuid, parent) from Berth's or Nova's arguments."""
    parent = kwargs.pop("parent_provider_uuid", None)
    if args and not isinstance(args[0], str):  # Nova: (context, rp_uuid, ...)
        rest = list(args[1:])
        uuid = rest.pop(0) if rest else kwargs.pop("rp_uuid")
        name = rest.pop(0) if rest else kwargs.pop("name", None)
        parent = rest.pop(0) if rest else parent
        nodename = name or uuid
    else:
        rest = list(args)
        nodename = rest.pop(0) if rest else kwargs.pop("nodename")
        uuid = rest.pop(0) if rest else kwargs.pop("uuid", None)
        parent = rest.pop(0) if rest else parent
    if kwargs or rest:
        raise TypeError("unexpected arguments: %r %r" % (rest, kwargs))
    return nodename, uuid, parent


def flush_args(
    args: tuple[Any, ...], allocations: AllocationsDict | None
) -> tuple[ProviderTree, AllocationsDict | None]:
    """(tree, allocations) from ``(tree[, allocations])`` or Nova's
    ``(context, tree[, allocations])``."""
    rest = list(args)
    if rest and not isinstance(rest[0], ProviderTree):
        rest.pop(0)
    if not rest or not isinstance(rest[0], ProviderTree) or len(rest) > 2:
        raise TypeError("update_from_provider_tree needs a ProviderTree")
    return rest[0], rest[1] if len(rest) == 2 else allocations
