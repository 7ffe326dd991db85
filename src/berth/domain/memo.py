"""Answers kept between requests while the change sequence says they hold.

A :class:`Memo` keeps values computed from the database at one
change-sequence position. Every write that changes what they are computed
from notes a change (see ``berth.db.changes``), so while the database's
position stays where the values were kept, they are exactly what reading
the database again would give. When the position moves, a whole memo
forgets everything; a memo keyed by provider id forgets only the
providers the change rows name, and one keyed by project only the
projects they name (everything on a global change or a gap).

Values are only ever kept in the dict of the position the caller's own
transaction read (:meth:`Memo.values`), so a request that started before
a change can never store what it read under a newer position; and a
memo kept per project (brought up to date by adding each write's amounts)
keeps a value only where the position still stands once it is computed,
so no write's amounts are in it before they are added. One lives
per kind of answer in each application's state; with ``[berth]
candidate_cache = false`` (writers that bypass the change sequence) none
keeps anything.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable, Mapping
from typing import Any, TypeVar

from sqlalchemy.engine import Connection

from berth.db import changes
from berth.position import Position

T = TypeVar("T")
#: How a ``by_project`` memo brings a value up to date: (connection,
#: key, value, the project's usage deltas) -> the new value, or None.
Updater = Callable[[Connection, Any, Any, Mapping[changes.UsageKey, int]], Any]


class Memo:
    """Values valid at one change-sequence position.

    ``by_provider``: keys are provider ids, and a change forgets only the
    providers it names. ``by_project``: keys are tuples whose first item
    is a project's external id, values are computed from that project's
    usages only, and a change touches only the projects whose usages it
    changed: each of their values becomes ``by_project(conn, key, value,
    deltas)`` (the project's share of ``changes.Changes.deltas``), or is
    forgotten where that gives None. ``limit``: past this many values the
    memo starts again empty (a bound on memory, not a cache policy worth
    tuning).
    """

    def __init__(
        self,
        *,
        keep: bool = True,
        by_provider: bool = False,
        by_project: Updater | None = None,
        limit: int = 100_000,
    ) -> None:
        self.keep = keep
        self.by_provider = by_provider
        self.by_project = by_project
        self.limit = limit
        # One attribute, swapped whole: a reader never pairs one
        # position with another position's values.
        self._kept: tuple[Position | None, dict[Hashable, Any]] = (None, {})
        self._lock = threading.Lock()

    def values(self, conn: Connection) -> dict[Hashable, Any]:
        """The dict of values valid at the position ``conn``'s transaction
        sees, to read and to fill. A transaction older than the memo (or a
        memo that keeps nothing) gets a dict of its own that nobody else
        reads."""
        return self._values_at(conn)[1]

    def _values_at(self, conn: Connection) -> tuple[Position | None, dict[Hashable, Any]]:
        """:meth:`values`, and the position they are valid at."""
        if not self.keep:
            return None, {}
        seq = changes.current(conn)
        at, kept = self._kept
        if seq == at and len(kept) < self.limit:
            return seq, kept
        with self._lock:
            at, kept = self._kept
            if at is not None and seq != at:
                if not seq >= at:
                    return seq, {}
                kept = self._survivors(conn, at, seq, kept)
            elif at is None or len(kept) >= self.limit:
                kept = {}
            self._kept = (seq, kept)
            return seq, kept

    def _survivors(
        self, conn: Connection, old: Position, new: Position, kept: dict[Hashable, Any]
    ) -> dict[Hashable, Any]:
        """What stays valid from ``old`` to ``new`` (a new dict: a thread
        still filling the old one fills a dict nobody reads again)."""
        if not (self.by_provider or self.by_project) or len(kept) >= self.limit:
            return {}
        found = changes.since(conn, old, new)
        if found.everything:
            return {}
        if self.by_project:
            return _per_project(conn, found, kept, self.by_project)
        gone = found.structure | found.usage
        return {k: v for k, v in kept.items() if k not in gone}

    def kept(self, conn: Connection, key: Hashable, compute: Callable[[Connection], T]) -> T:
        """The value kept under ``key``, else ``compute(conn)`` (kept for
        the next caller). Callers must not modify what they get.

        A ``by_project`` memo keeps a computed value only if the position
        still stands once it is computed. At READ COMMITTED (PostgreSQL,
        MariaDB: ``berth.db.engine``) each statement of a read sees what
        committed before it, so a write that commits between the
        position's read and ``compute``'s is in the value; kept under the
        older position, its amounts would be added to it again when the
        memo moves past that write. (A whole or ``by_provider`` memo
        forgets what such a write names; on SQLite a read is one
        snapshot.)"""
        seq, values = self._values_at(conn)
        try:
            return values[key]  # type: ignore[no-any-return]
        except KeyError:
            value = compute(conn)
            if self.by_project is None or changes.current(conn) == seq:
                values[key] = value
            return value


def _per_project(
    conn: Connection, found: changes.Changes, kept: dict[Hashable, Any], update: Updater
) -> dict[Hashable, Any]:
    """``kept`` (keyed ``(project external id, ...)``) after ``found``:
    values of projects it did not change as they were, the others
    brought up to date by ``update`` (or gone where it says None)."""
    if found.projects is None:
        return {}
    if not found.projects or not kept:
        return dict(kept)
    changed = {name: pid for pid, name in found.project_names.items()}
    result: dict[Hashable, Any] = {}
    for key, value in kept.items():
        pid = changed.get(key[0])  # type: ignore[index]
        if pid is not None:
            value = update(conn, key, value, {k: n for k, n in found.deltas.items() if k[0] == pid})
        if value is not None:
            result[key] = value
    return result
