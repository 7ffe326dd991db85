"""Copy-on-write edits of the world's indexes (``world_patch.with_changes``).

Most of the world's indexes map a key (a trait, an aggregate, a root, a
class) to the providers under it: a set of ids, or a list of ids in uuid
order. When a few providers change, only the entries of the keys they
leave or join are edited, each in a copy, in a copy of the mapping: the
old world is being read by other threads and is never modified, and every
entry no provider left or joined is the same object in both worlds.
With ``in_place`` (the old world is read by nobody any more: a ``berth
serve`` worker's own cache) the mappings and entries themselves are
edited, copying nothing.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Hashable, Iterable, Mapping
from typing import Protocol, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: provider id -> its uuid, in one world
Uuid = Callable[[int], str]


class Member(Protocol):
    """What the edits need of a provider."""

    @property
    def id(self) -> int: ...

    @property
    def uuid(self) -> str: ...


M = TypeVar("M", bound=Member)


class Unpatchable(Exception):
    """An index does not hold a provider where the old world says it is
    (two providers with one uuid): the world must be built anew."""


def shifts(
    changes: Iterable[tuple[M | None, M | None]], keys: Callable[[M], Iterable[K]], *, ordered: bool
) -> tuple[dict[K, list[M]], dict[K, list[M]]]:
    """key -> the old versions of the providers leaving its entry, and
    key -> the new versions of those joining it, for each (old, new)
    version pair (old None: created; new None: deleted) and the keys
    ``keys`` gives a version. In an ``ordered`` index a provider whose
    uuid changed leaves every entry and joins them again, to move."""
    leave: dict[K, list[M]] = {}
    join: dict[K, list[M]] = {}
    for old, new in changes:
        before = set() if old is None else set(keys(old))
        after = set() if new is None else set(keys(new))
        if not (ordered and old is not None and new is not None and old.uuid != new.uuid):
            before, after = before - after, after - before
        if old is not None:
            for key in before:
                leave.setdefault(key, []).append(old)
        if new is not None:
            for key in after:
                join.setdefault(key, []).append(new)
    return leave, join


def edit_sets(
    index: dict[K, set[int]],
    leave: dict[K, list[M]],
    join: dict[K, list[M]],
    *,
    in_place: bool = False,
) -> dict[K, set[int]]:
    """``index`` with the providers of ``leave`` out of, and those of
    ``join`` into, their keys' sets (a key left empty goes); ``index``
    itself when nothing moves."""
    if not leave and not join:
        return index
    out = index if in_place else dict(index)
    for key in leave.keys() | join.keys():
        have = out.get(key)
        members = have if in_place and have is not None else set(have or ())
        members.difference_update(m.id for m in leave.get(key, ()))
        members.update(m.id for m in join.get(key, ()))
        if members:
            out[key] = members
        else:
            out.pop(key, None)
    return out


def edit_lists(
    index: dict[K, list[int]],
    leave: dict[K, list[M]],
    join: dict[K, list[M]],
    before: Uuid,
    after: Uuid,
    *,
    in_place: bool = False,
) -> dict[K, list[int]]:
    """``index`` (lists in uuid order) with the providers of ``leave``
    out of, and those of ``join`` into, their keys' lists (a key left
    empty goes); ``index`` itself when nothing moves. ``before`` gives
    the uuids of the ids in ``index``, ``after`` those of the new
    world."""
    if not leave and not join:
        return index
    out = index if in_place else dict(index)
    for key in leave.keys() | join.keys():
        members = edit_list(
            out.get(key, []),
            leave.get(key, ()),
            join.get(key, ()),
            before,
            after,
            in_place=in_place,
        )
        if members:
            out[key] = members
        else:
            out.pop(key, None)
    return out


def edit_list(
    members: list[int],
    leave: Iterable[Member],
    join: Iterable[Member],
    before: Uuid,
    after: Uuid,
    *,
    in_place: bool = False,
) -> list[int]:
    """A copy of ``members`` (ids in uuid order) without ``leave`` and
    with ``join``, in uuid order (see ``edit_lists``); ``members`` itself,
    so edited, ``in_place``."""
    out = members if in_place else list(members)
    for m in leave:
        del out[position(out, m, before)]
    for m in join:
        bisect.insort(out, m.id, key=after)
    return out


def position(members: list[int], m: Member, uuid: Uuid) -> int:
    """Where ``m`` is in ``members`` (ids in the uuid order ``uuid``
    gives). Raises Unpatchable when it is not there."""
    i = bisect.bisect_left(members, m.uuid, key=uuid)
    if i == len(members) or members[i] != m.id:
        raise Unpatchable(m.id)
    return i


def updated(
    index: dict[K, V], changes: Mapping[K, V | None], *, in_place: bool = False
) -> dict[K, V]:
    """A copy of ``index`` (``in_place``: ``index`` itself) with
    ``changes`` made (None: the key goes); ``index`` itself when each
    already holds what its change says."""
    real = {k: v for k, v in changes.items() if index.get(k) != v}
    if not real:
        return index
    out = index if in_place else dict(index)
    for key, value in real.items():
        if value is None:
            del out[key]
        else:
            out[key] = value
    return out


def edit_at(values: list[V], at: dict[int, V], old: list[V], *, in_place: bool = False) -> list[V]:
    """``values`` with the values ``at`` gives at those positions, copied
    first when it is still the ``old`` world's list and one differs
    (never ``in_place``)."""
    for i, value in at.items():
        if values[i] != value:
            if values is old and not in_place:
                values = list(old)
            values[i] = value
    return values
