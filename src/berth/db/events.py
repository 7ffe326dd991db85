"""The change feed's event log: what each numbered write did.

Domain writers *record* events while they run (:func:`record`), beside
the notes they make for the caches (``berth.db.changes.note``); the one
writer of this log is ``berth.db.changes.flush``, which, when it numbers
the write, hands the recorded events to :func:`write`: one multi-row
insert into ``berth_events`` under the write's (slot, seq), in the same
transaction. So an event is visible exactly when its write is, and its
position is the write's position in the change sequence.

Every event says what its subject is now (``new``) and was (``old``):
applying the events after a position, in order, to the state listed at
that position gives the state now, and applying an event twice changes
nothing (each carries whole values, never increments). A numbered write
that changes something no event describes (an import, an online data
migration) records one ``resync`` event (:func:`resync`): list again.

History is kept for a configurable time (``[berth]
change_feed_retention``); :func:`prune` removes older events and raises
the slot's ``berth_state.pruned`` mark, and a reader asking for events
after a position older than the mark is told so (:class:`Gone`).
"""

from __future__ import annotations

import heapq
import time
from dataclasses import dataclass
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import tables as t
from berth.position import Position

# The kinds of event (docs/change-feed.md describes each body).
PROVIDER_CREATED = "provider.created"
PROVIDER_UPDATED = "provider.updated"
PROVIDER_DELETED = "provider.deleted"
INVENTORIES_SET = "inventories.set"
TRAITS_SET = "traits.set"
AGGREGATES_SET = "aggregates.set"
ALLOCATIONS_REPLACED = "allocations.replaced"
ALLOCATIONS_REMOVED = "allocations.removed"
RESOURCE_CLASS_CREATED = "resource_class.created"
RESOURCE_CLASS_UPDATED = "resource_class.updated"
RESOURCE_CLASS_DELETED = "resource_class.deleted"
TRAIT_CREATED = "trait.created"
TRAIT_DELETED = "trait.deleted"
RESYNC = "resync"

KINDS = (
    PROVIDER_CREATED,
    PROVIDER_UPDATED,
    PROVIDER_DELETED,
    INVENTORIES_SET,
    TRAITS_SET,
    AGGREGATES_SET,
    ALLOCATIONS_REPLACED,
    ALLOCATIONS_REMOVED,
    RESOURCE_CLASS_CREATED,
    RESOURCE_CLASS_UPDATED,
    RESOURCE_CLASS_DELETED,
    TRAIT_CREATED,
    TRAIT_DELETED,
    RESYNC,
)
#: The kinds about one consumer's allocations.
ALLOCATION_KINDS = (ALLOCATIONS_REPLACED, ALLOCATIONS_REMOVED)

#: Default retention (seconds) when the caller sets none.
DEFAULT_RETENTION = 86400.0

_RECORDED = "berth.events.recorded"
_GENERATIONS = "berth.events.generations"


@dataclass(frozen=True, slots=True)
class Event:
    """One event as recorded (before it has a position)."""

    kind: str
    subject: str | None
    new: Any
    old: Any
    tree: str | None = None
    project: str | None = None


def record(conn: Connection, event: Event) -> None:
    """Record ``event`` for the running transaction (written when
    ``berth.db.changes.flush`` numbers it)."""
    conn.info.setdefault(_RECORDED, []).append(event)


def resync(conn: Connection) -> None:
    """Record that the running transaction changes what no event
    describes (an import, a data migration): readers list again."""
    record(conn, Event(RESYNC, None, None, None))


def note_generation(conn: Connection, provider_id: int, generation: int) -> None:
    """Keep, for the running transaction, a provider's new generation
    (allocation events carry those of the providers they touch)."""
    conn.info.setdefault(_GENERATIONS, {})[provider_id] = generation


def generations(conn: Connection) -> dict[int, int]:
    """The generations the running transaction gave providers, by id."""
    found: dict[int, int] = conn.info.get(_GENERATIONS, {})
    return found


def take(conn: Connection) -> list[Event]:
    """The events recorded in the running transaction; they and the
    generations noted are forgotten here (a pooled connection serves
    other transactions next)."""
    conn.info.pop(_GENERATIONS, None)
    recorded: list[Event] = conn.info.pop(_RECORDED, None) or []
    return recorded


def rows(recorded: list[Event]) -> list[dict[str, Any]]:
    """The ``berth_events`` rows of ``recorded``, but for their slot and
    sequence number."""
    stamp = time.time()
    return [
        {
            "idx": idx,
            "kind": e.kind,
            "subject": e.subject,
            "tree": e.tree,
            "project": e.project,
            "created_at": stamp,
            "body": orjson.dumps({"new": e.new, "old": e.old}).decode(),
        }
        for idx, e in enumerate(recorded)
    ]


#: Built once: every numbered write that recorded events runs it.
_INSERT = t.berth_events.insert()


def write(conn: Connection, slot: int, seq: int, recorded: list[Event]) -> None:
    """Insert the events of write (``slot``, ``seq``): one statement."""
    conn.execute(_INSERT, [{**row, "slot": slot, "seq": seq} for row in rows(recorded)])


def prune(conn: Connection, slot: int, before: float) -> int:
    """Delete ``slot``'s events written before ``before`` (epoch seconds)
    and raise its pruned mark; return the new mark (0: nothing pruned).

    Runs inside a write that holds the slot's counter row, so the mark
    and the deletion commit together."""
    ev, state = t.berth_events, t.berth_state
    last = conn.scalar(
        sa.select(sa.func.max(ev.c.seq)).where(ev.c.slot == slot, ev.c.created_at < before)
    )
    if last is None:
        return 0
    conn.execute(ev.delete().where(ev.c.slot == slot, ev.c.seq <= last))
    conn.execute(
        state.update().where(state.c.id == slot, state.c.pruned < last).values(pruned=last)
    )
    return int(last)


class Gone(Exception):
    """The events after the asked position are pruned, or were never
    written here (``ahead``: the position is past this database's, which
    a restored backup or another database gives): list again. ``oldest``
    is the oldest position a reader can still read on from, ``current``
    the database's newest."""

    def __init__(self, oldest: Position, current: Position, *, ahead: bool) -> None:
        super().__init__("ahead of the database" if ahead else "history pruned")
        self.oldest, self.current, self.ahead = oldest, current, ahead


@dataclass(frozen=True, slots=True)
class Stored:
    """One event as read back, with its position (slot, seq)."""

    slot: int
    seq: int
    idx: int
    kind: str
    subject: str | None
    tree: str | None
    project: str | None
    created_at: float
    new: Any
    old: Any


@dataclass(frozen=True, slots=True)
class Filters:
    """Which events a reader wants (None: any)."""

    kinds: frozenset[str] | None = None
    subjects: frozenset[str] | None = None
    project: str | None = None
    #: With trees (root uuids): only events about one of them, or of one
    #: of the ``any_tree`` kinds (whose tree the reader judges itself).
    trees: frozenset[str] | None = None
    any_tree: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class EventPage:
    """Events after a position, and the position a reader has then
    seen everything up to (``upto``)."""

    events: list[Stored]
    upto: Position
    more: bool


def marks(conn: Connection) -> tuple[Position, Position]:
    """The newest number of every slot, and every slot's pruned mark, as
    positions (one statement)."""
    state = t.berth_state
    rows = conn.execute(sa.select(state.c.id, state.c.seq, state.c.pruned))
    current: dict[int, int] = {}
    pruned: dict[int, int] = {}
    for slot, seq, mark in rows:
        current[int(slot)] = int(seq)
        pruned[int(slot)] = int(mark)
    return Position.of(current), Position.of(pruned)


def _check(after: Position, current: Position, pruned: Position) -> None:
    lost = any(after.get(slot) < mark for slot, mark in pruned.seqs)
    ahead = any(seq > current.get(slot) for slot, seq in after.seqs)
    if lost or ahead:
        # Ahead says more than lost: no pruning explains a number this
        # database never gave.
        raise Gone(pruned, current, ahead=ahead)


def read(conn: Connection, after: Position, filters: Filters, limit: int) -> EventPage:
    """The events after ``after``, in the order a reader
    can see them, at most about ``limit`` (whole writes only).

    Raises :class:`Gone` when ``after`` is older than the kept history
    (or newer than this database's sequence: another or restored
    database)."""
    current, pruned = marks(conn)
    _check(after, current, pruned)
    per_slot: list[list[Stored]] = []
    upto: dict[int, int] = {}
    cuts: list[Key] = []
    for slot, last in current.seqs:
        first = after.get(slot)
        upto[slot] = max(first, last)
        if last <= first:
            continue
        rows, cut = _slot_rows(conn, slot, first, last, filters, limit)
        if cut is not None:
            upto[slot] = cut
            cuts.append(_key(rows[-1]))
        per_slot.append(rows)
    # Pruning that committed meanwhile may have taken rows this read
    # wanted: then say so rather than hand out a gap.
    _check(after, current, marks(conn)[1])
    merged = list(heapq.merge(*per_slot, key=_key))
    if not cuts:
        return EventPage(merged, Position.of(upto), False)
    # A slot cut short may hold, past its cut, writes that come before
    # other slots' later rows: keep only the merged prefix up to the
    # earliest cut, and read each slot on from what was kept.
    bound = min(cuts)
    kept = [e for e in merged if _key(e) <= bound]
    for e in merged[len(kept) :]:
        if upto[e.slot] >= e.seq:
            upto[e.slot] = e.seq - 1
    return EventPage(kept, Position.of(upto), True)


#: Where an event sorts in the order a reader can see the writes: the
#: time its write committed, then its slot and number.
Key = tuple[float, int, int]


def _key(e: Stored) -> Key:
    return (e.created_at, e.slot, e.seq)


def _slot_rows(
    conn: Connection, slot: int, first: int, last: int, filters: Filters, limit: int
) -> tuple[list[Stored], int | None]:
    """One slot's events in (first, last], and the number it stopped at
    when ``limit`` cut it short (None: all of them)."""
    ev = t.berth_events
    query = (
        sa.select(ev)
        .where(ev.c.slot == slot, ev.c.seq > first, ev.c.seq <= last)
        .order_by(ev.c.seq, ev.c.idx)
        .limit(limit + 1)
    )
    if filters.kinds is not None:
        query = query.where(ev.c.kind.in_(sorted(filters.kinds)))
    if filters.subjects is not None:
        query = query.where(ev.c.subject.in_(sorted(filters.subjects)))
    if filters.project is not None:
        query = query.where(ev.c.project == filters.project)
    if filters.trees is not None:
        query = query.where(
            sa.or_(ev.c.tree.in_(sorted(filters.trees)), ev.c.kind.in_(sorted(filters.any_tree)))
        )
    rows = [_stored(row) for row in conn.execute(query)]
    if len(rows) <= limit:
        return rows, None
    # Stop before the write the limit cut through (keep one at least).
    cut = rows[limit].seq
    kept = [e for e in rows if e.seq < cut]
    if not kept:  # one write with more events than the limit: all of it
        kept = [_stored(row) for row in conn.execute(query.where(ev.c.seq == cut).limit(None))]
    return kept, kept[-1].seq


def _stored(row: Any) -> Stored:
    body = orjson.loads(row.body)
    return Stored(
        int(row.slot),
        int(row.seq),
        int(row.idx),
        row.kind,
        row.subject,
        row.tree,
        row.project,
        float(row.created_at),
        body["new"],
        body["old"],
    )
