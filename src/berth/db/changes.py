"""The change sequence: how each worker learns that what it cached is stale.

Every write transaction that changes what the allocation-candidate engine
keeps in memory (providers and their trees, inventories, usage, traits,
aggregates, resource classes) *notes* what it changed while it runs, and
``Database.run`` *flushes* the notes just before it commits: it bumps the
single counter row ``berth_state.seq`` and writes one ``berth_changes``
row per provider touched, all in the same transaction as the change.

The counter row is taken last and held only until the commit, so sequence
numbers commit in order: a reader that has seen number N has seen every
change numbered N or less. A reader compares the counter with the number
its cache was built at; when they differ, :func:`since` lists what
changed in between (or says the rows are gone, pruned, and the cache must
be rebuilt whole).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import tables as t

#: A provider's usage changed (allocations written or removed).
USAGE = "u"
#: Anything else the engine caches changed: the provider itself, its
#: inventories, traits or aggregates; with no provider, something global
#: (resource classes, traits).
STRUCTURE = "s"

#: Beyond this many providers in one transaction, one global row is
#: written instead (the reader rebuilds its cache whole anyway).
MAX_ROWS = 256
#: Every PRUNE_EVERY sequence numbers, rows older than KEEP numbers go.
PRUNE_EVERY = 512
KEEP = 4096

_PENDING = "berth.changes.pending"


def note(conn: Connection, kind: str,
         provider_ids: Iterable[int] | None = None) -> None:
    """Record, for the running transaction, that ``provider_ids`` (None:
    everything) changed in the way ``kind`` says."""
    pending: set[tuple[str, int | None]] = conn.info.setdefault(_PENDING, set())
    if provider_ids is None:
        pending.add((kind, None))
    else:
        pending.update((kind, pid) for pid in provider_ids)


def discard(conn: Connection) -> None:
    """Forget notes left over from a transaction that did not commit."""
    conn.info.pop(_PENDING, None)


def flush(conn: Connection) -> int | None:
    """Write the transaction's notes under a new sequence number (None
    when nothing was noted). Call last, just before the commit."""
    pending: set[tuple[str, int | None]] | None = conn.info.pop(_PENDING, None)
    if not pending:
        return None
    state = t.berth_state
    bump = state.update().where(state.c.id == 1).values(seq=state.c.seq + 1)
    seq: int | None
    if conn.dialect.update_returning:
        seq = conn.scalar(bump.returning(state.c.seq))
    else:
        bumped = conn.execute(bump)
        seq = current(conn) if bumped.rowcount == 1 else None
    if seq is None:
        seq = _first(conn, bump)
    kinds = {kind for kind, _ in pending}
    rows: list[tuple[str, int | None]]
    if len(pending) > MAX_ROWS or (STRUCTURE, None) in pending:
        rows = [(STRUCTURE if STRUCTURE in kinds else USAGE, None)]
    else:
        rows = sorted(pending, key=lambda r: (r[0], r[1] or 0))
    conn.execute(t.berth_changes.insert(), [
        {"seq": seq, "kind": kind, "resource_provider_id": pid}
        for kind, pid in rows])
    if seq % PRUNE_EVERY == 0:
        conn.execute(t.berth_changes.delete()
                     .where(t.berth_changes.c.seq <= seq - KEEP))
    return seq


def _first(conn: Connection, bump: sa.Update) -> int:
    """The counter row is missing (a database not built by ``berth db
    sync``): create it, or, if a concurrent writer just did, bump it."""
    state = t.berth_state
    try:
        with conn.begin_nested():
            conn.execute(state.insert().values(id=1, seq=1))
        return 1
    except sa.exc.IntegrityError:
        conn.execute(bump)
        return current(conn)


def current(conn: Connection) -> int:
    """The newest committed sequence number."""
    state = t.berth_state
    return int(conn.scalar(sa.select(state.c.seq).where(state.c.id == 1))
               or 0)


@dataclass(frozen=True)
class Changes:
    """What changed after one sequence number, up to another."""

    #: True when a global change happened, or the rows needed are pruned:
    #: whatever was cached must be rebuilt.
    everything: bool
    structure: frozenset[int]
    usage: frozenset[int]


def since(conn: Connection, after: int, upto: int) -> Changes:
    """The changes numbered ``after + 1`` to ``upto``."""
    if upto - after > KEEP // 2:
        return Changes(True, frozenset(), frozenset())
    ch = t.berth_changes
    rows = conn.execute(
        sa.select(ch.c.seq, ch.c.kind, ch.c.resource_provider_id)
        .where(ch.c.seq > after, ch.c.seq <= upto)).all()
    # Every number in the range wrote at least one row; a gap means the
    # rows were pruned.
    if len({r[0] for r in rows}) != upto - after:
        return Changes(True, frozenset(), frozenset())
    structure: set[int] = set()
    usage: set[int] = set()
    for _seq, kind, pid in rows:
        if pid is None:
            return Changes(True, frozenset(), frozenset())
        (structure if kind == STRUCTURE else usage).add(pid)
    return Changes(False, frozenset(structure), frozenset(usage))
