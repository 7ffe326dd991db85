"""The change sequence: how each worker learns that what it cached is stale.

Every write transaction that changes what the allocation-candidate engine
keeps in memory (providers and their trees, inventories, usage, traits,
aggregates, resource classes), or what ``berth.domain.memo`` keeps (provider
rows, usages by project), *notes* what it changed while it runs, and
``Database.run`` *flushes* the notes just before it commits: it bumps one
counter row of ``berth_state`` and writes one ``berth_changes`` row per
provider touched, all in the same transaction as the change.

There is one counter row per *slot*. A slot is the database node the
connection writes to: every connection to one server shares slot 1; on a
MariaDB Galera cluster each node has its own slot (from its
``wsrep_node_name``). One counter row for the whole cluster would be a
row that every write on every node changes, so any two writes on
different nodes would fail certification against each other; with a row
per node they do not (measured in docs/reliability.md).

A counter row is taken last and held only until the commit, so the
numbers of one slot commit in order (on Galera, writes to one slot are
made on one node and applied everywhere in commit order): a reader that
has seen number N of a slot has seen every change of that slot numbered
N or less. A reader reads all counter rows in one statement, a
:class:`Position`, and compares it with the position its cache was built
at; where they differ, :func:`since` lists what changed in between (or
says the rows are gone, pruned, and the cache must be rebuilt whole).
A change that another slot's transaction depended on committed before
it, so any snapshot that shows the later one shows both.
"""

from __future__ import annotations

import time
import zlib
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import events
from berth.db import tables as t

# The position type is shared with the client library (which imports no
# database code); this module reads and writes it.
from berth.position import Position as Position

#: A provider's usage changed (allocations written or removed).
USAGE = "u"
#: A project's usages changed. The row's id column holds the project's
#: ``projects.id`` (not a provider id: a reader from before this kind takes
#: it for a provider's usage, a needless refresh, never a wrong answer),
#: and the row says by how much: of ``resource_class_id`` for ``user_id``'s
#: consumers of ``consumer_type_id``, ``amount`` more (or less); with no
#: class, ``amount`` more consumers hold allocations. Every write that
#: changes usage notes these (:func:`note_usage`); a numbered write with
#: usage rows and no project rows comes from an older writer, and every
#: project's usages count as changed in unknown ways.
PROJECT = "p"
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
_DELTAS = "berth.changes.deltas"
_SLOT = "berth.changes.slot"
#: The slot of every connection outside a Galera cluster.
ONE_SLOT = 1


def slot(conn: Connection) -> int:
    """The counter slot of ``conn``'s database node (cached per DBAPI
    connection: a connection never moves to another node)."""
    found = conn.info.get(_SLOT)
    if found is None:
        found = ONE_SLOT
        if conn.dialect.name == "mysql":
            row = conn.execute(sa.text("SHOW GLOBAL VARIABLES LIKE 'wsrep_on'")).first()
            if row is not None and str(row.Value).upper() == "ON":
                name = conn.execute(sa.text("SELECT @@wsrep_node_name")).scalar_one()
                # Slot 1 stays for single servers; a collision of two
                # nodes' slots costs retries, never correctness.
                found = 2 + zlib.crc32(str(name).encode()) % (2**30)
        conn.info[_SLOT] = found
    return int(found)


def note(conn: Connection, kind: str, provider_ids: Iterable[int] | None = None) -> None:
    """Record, for the running transaction, that ``provider_ids`` (None:
    everything) changed in the way ``kind`` says."""
    pending: set[tuple[str, int | None]] = conn.info.setdefault(_PENDING, set())
    if provider_ids is None:
        pending.add((kind, None))
    else:
        pending.update((kind, pid) for pid in provider_ids)


#: Whose usage changed: (projects.id, users.id, consumer_types.id or
#: None, resource_classes.id, or None for the count of consumers).
UsageKey = tuple[int, int, "int | None", "int | None"]


def note_usage(conn: Connection, deltas: Mapping[UsageKey, int]) -> None:
    """Record, for the running transaction, how the usages of projects
    changed: ``deltas`` adds to amounts used (a class) or to the number
    of consumers holding allocations (no class). Zero amounts still name
    their project as written to."""
    pending: Counter[UsageKey] = conn.info.setdefault(_DELTAS, Counter())
    for key, amount in deltas.items():
        pending[key] += amount


def discard(conn: Connection) -> None:
    """Forget notes (and recorded events) left over from a transaction
    that did not commit."""
    conn.info.pop(_PENDING, None)
    conn.info.pop(_DELTAS, None)
    events.take(conn)


def flush(conn: Connection, retention: float = events.DEFAULT_RETENTION) -> int | None:
    """Write the transaction's notes, and the change feed's events its
    writers recorded (``berth.db.events``), under a new sequence number
    of this connection's slot (None when nothing was noted). Call last,
    just before the commit. Every ``PRUNE_EVERY`` numbers, change rows
    beyond ``KEEP`` numbers and events older than ``retention`` seconds
    go."""
    pending: set[tuple[str, int | None]] = conn.info.pop(_PENDING, None) or set()
    deltas: Counter[UsageKey] = conn.info.pop(_DELTAS, None) or Counter()
    recorded = events.take(conn)
    if not pending and not deltas and not recorded:
        return None
    mine = slot(conn)
    ch = t.berth_changes
    # Every numbered write leaves a change row (:func:`since` counts on
    # it); one that only recorded events (a trait or class created) names
    # provider 0, which is none: readers refresh their classes and traits.
    rows = [
        {**_EMPTY, **row}
        for row in (
            _rows(pending, deltas)
            if pending or deltas
            else [{"kind": STRUCTURE, "resource_provider_id": 0}]
        )
    ]
    seq = _flush_at_once(conn, mine, rows, recorded) if conn.dialect.name == "postgresql" else None
    if seq is None:
        seq = _next(conn, mine)
        conn.execute(_INSERT, [{**row, "slot": mine, "seq": seq} for row in rows])
        if recorded:  # else nothing a feed reader keeps changed
            events.write(conn, mine, seq, recorded)
    if seq % PRUNE_EVERY == 0:
        conn.execute(ch.delete().where(ch.c.slot == mine, ch.c.seq <= seq - KEEP))
        events.prune(conn, mine, time.time() - retention)
    return seq


_EMPTY = {"user_id": None, "consumer_type_id": None, "resource_class_id": None, "amount": None}
_INSERT = t.berth_changes.insert()

#: PostgreSQL: the counter bump, the change rows and the events in one
#: statement (one round trip where there were three). The rows come as
#: two JSON arrays of objects (one parameter each, encoded by orjson):
#: thirteen array parameters, one a column, cost psycopg more to encode
#: than the rest of a claim's statements. No row back: the slot's
#: counter row is missing, and nothing was written.
_AT_ONCE = f"""
WITH s AS (UPDATE {t.berth_state.name} SET seq = seq + 1
           WHERE id = %(slot)s RETURNING seq),
c AS (INSERT INTO {t.berth_changes.name} (slot, seq, kind,
        resource_provider_id, user_id, consumer_type_id, resource_class_id,
        amount)
      SELECT %(slot)s, s.seq, u.kind, u.resource_provider_id, u.user_id,
             u.consumer_type_id, u.resource_class_id, u.amount
      FROM s, json_to_recordset(%(changes)s::json)
              AS u(kind varchar, resource_provider_id integer,
                   user_id integer, consumer_type_id integer,
                   resource_class_id integer, amount bigint)),
e AS (INSERT INTO {t.berth_events.name} (slot, seq, idx, kind, subject,
        tree, project, created_at, body)
      SELECT %(slot)s, s.seq, v.idx, v.kind, v.subject, v.tree, v.project,
             v.created_at, v.body
      FROM s, json_to_recordset(%(events)s::json)
              AS v(idx integer, kind varchar, subject varchar, tree varchar,
                   project varchar, created_at float8, body text))
SELECT seq FROM s
"""


def _flush_at_once(
    conn: Connection, mine: int, rows: list[dict[str, Any]], recorded: list[events.Event]
) -> int | None:
    """PostgreSQL: number the write and write its change rows and events
    in one statement (:data:`_AT_ONCE`); None when the slot has no
    counter row yet (nothing written: the caller goes the long way)."""
    params = {
        "slot": mine,
        "changes": orjson.dumps(rows).decode(),
        "events": orjson.dumps(events.rows(recorded)).decode(),
    }
    seq = conn.exec_driver_sql(_AT_ONCE, params).scalar()
    return None if seq is None else int(seq)


#: Built once (every numbered write runs one): the slot's counter +1,
#: and the same returning the new number where the database can.
_BUMP = (
    t.berth_state.update()
    .where(t.berth_state.c.id == sa.bindparam("b_slot"))
    .values(seq=t.berth_state.c.seq + 1)
)
_BUMP_RETURNING = _BUMP.returning(t.berth_state.c.seq)


def _next(conn: Connection, mine: int) -> int:
    """Bump the slot's counter row (taking its lock until the commit)
    and return the new number."""
    seq: int | None
    params = {"b_slot": mine}
    if conn.dialect.update_returning:
        seq = conn.scalar(_BUMP_RETURNING, params)
    else:
        bumped = conn.execute(_BUMP, params)
        seq = _seq_of(conn, mine) if bumped.rowcount == 1 else None
    if seq is None:
        seq = _first(conn, mine)
    return seq


def _rows(
    pending: set[tuple[str, int | None]], deltas: Counter[UsageKey]
) -> list[dict[str, object]]:
    """The change rows for the notes: one per (kind, provider) and one
    per project delta, or one global row when there are too many."""
    kinds = {kind for kind, _ in pending}
    if len(deltas) > MAX_ROWS:
        # Without its project rows the write counts as one that changed
        # every project's usages by unknown amounts.
        deltas = Counter()
        if not pending:
            pending = {(USAGE, None)}
    if len(pending) > MAX_ROWS or (STRUCTURE, None) in pending:
        return [{"kind": STRUCTURE if STRUCTURE in kinds else USAGE, "resource_provider_id": None}]
    rows: list[dict[str, object]] = [
        {"kind": kind, "resource_provider_id": pid}
        for kind, pid in sorted(pending, key=_by_kind_and_provider)
    ]
    for key in sorted(deltas, key=repr):
        project, user, type_id, rc = key
        rows.append(
            {
                "kind": PROJECT,
                "resource_provider_id": project,
                "user_id": user,
                "consumer_type_id": type_id,
                "resource_class_id": rc,
                "amount": deltas[key],
            }
        )
    return rows


def _by_kind_and_provider(note: tuple[str, int | None]) -> tuple[str, int]:
    kind, pid = note
    return kind, pid or 0


def _first(conn: Connection, mine: int) -> int:
    """The slot's counter row is missing (a new Galera node, or a
    database not built by ``berth db sync``): create it, or, if a
    concurrent writer just did, bump it. It starts past any change rows
    the slot left behind: numbers never go back, so no cache that saw
    the old ones takes itself for newer than the database."""
    state, ch = t.berth_state, t.berth_changes
    first = (
        int(
            conn.scalar(
                sa.select(sa.func.coalesce(sa.func.max(ch.c.seq), 0)).where(ch.c.slot == mine)
            )
            or 0
        )
        + 1
    )
    try:
        with conn.begin_nested():
            # The feed kept no events of the numbers before ``first``.
            conn.execute(state.insert().values(id=mine, seq=first, pruned=first - 1))
        return first
    except sa.exc.IntegrityError:
        conn.execute(_BUMP, {"b_slot": mine})
        return _seq_of(conn, mine)


def _seq_of(conn: Connection, mine: int) -> int:
    state = t.berth_state
    return int(conn.scalar(sa.select(state.c.seq).where(state.c.id == mine)) or 0)


#: How far :func:`skip_past_restore` moves each slot's number: past any
#: number the history a restore lost can have given (four billion writes,
#: over a year of 100 writes a second).
RESTORE_JUMP = 2**32


def skip_past_restore(conn: Connection) -> Position:
    """After the database was restored from a backup, whose counters are
    behind numbers already handed out: move every slot's number
    ``RESTORE_JUMP`` ahead and mark the change feed's history pruned up
    to there; return the new position.

    As for a new slot (:func:`_first`), numbers never go back: a cache
    built before the restore now finds a gap after its position
    (:func:`since` says everything changed) and reloads whole, and a
    feed reader's position is older than the pruned mark (410: list
    again), instead of reading on from a number the restored database
    gives to another write."""
    state = t.berth_state
    conn.execute(state.update().values(seq=state.c.seq + RESTORE_JUMP))
    # Apart: MySQL would read the new seq within one SET list.
    conn.execute(state.update().values(pruned=state.c.seq))
    return current(conn)


#: :func:`current`'s statement, as the driver takes it: every request
#: reads it, and plain SQL skips the statement's construction, cache key
#: and compiled-cache look-up (half of its cost on PostgreSQL, where the
#: driver prepares it after a few runs).
_CURRENT = "SELECT id, seq FROM %s ORDER BY id" % t.berth_state.name


def current(conn: Connection) -> Position:
    """The newest committed position (every slot, one statement)."""
    return Position(tuple((int(mine), int(seq)) for mine, seq in conn.exec_driver_sql(_CURRENT)))


@dataclass(frozen=True)
class Changes:
    """What changed after one sequence number, up to another."""

    #: True when a global change happened, or the rows needed are pruned:
    #: whatever was cached must be rebuilt.
    everything: bool
    structure: frozenset[int]
    usage: frozenset[int]
    #: The projects whose usages changed (``projects.id``); None when a
    #: write changed usage without naming its projects.
    projects: frozenset[int] | None = frozenset()
    #: By how much, summed over the writes (see :data:`PROJECT`).
    deltas: Mapping[UsageKey, int] = field(default_factory=dict)
    #: The external id of each project in ``projects``.
    project_names: Mapping[int, str] = field(default_factory=dict)


#: What :func:`since` answers when the cache must be rebuilt whole.
EVERYTHING = Changes(True, frozenset(), frozenset(), None)


#: :func:`since`'s statement for one range per slot, as the driver takes
#: it (a placeholder for each of slot, first and last number): run after
#: every write by each cache and memo that reads on, so, like
#: :data:`_CURRENT`, it skips SQLAlchemy's statement building. A project
#: row brings its project's external id along.
_SINCE = (
    "SELECT c.slot, c.seq, c.kind, c.resource_provider_id, c.user_id, "
    "c.consumer_type_id, c.resource_class_id, c.amount, p.external_id "
    f"FROM {t.berth_changes.name} c LEFT OUTER JOIN {t.projects.name} p "
    f"ON c.kind = '{PROJECT}' AND p.id = c.resource_provider_id "
    "WHERE "
)


def placeholder(conn: Connection) -> str:
    """The driver's positional parameter marker."""
    return "?" if conn.dialect.paramstyle == "qmark" else "%s"


def since(conn: Connection, after: Position, upto: Position) -> Changes:
    """The changes after ``after``, up to ``upto``, in every slot."""
    ranges: list[int] = []
    wanted = 0
    for mine, last in upto.seqs:
        first = after.get(mine)
        if last - first > KEEP // 2:
            return EVERYTHING
        if last > first:
            wanted += last - first
            ranges += (mine, first, last)
    if not ranges:
        return Changes(False, frozenset(), frozenset())
    mark = placeholder(conn)
    one = f"(c.slot = {mark} AND c.seq > {mark} AND c.seq <= {mark})"
    rows = conn.exec_driver_sql(
        _SINCE + " OR ".join([one] * (len(ranges) // 3)), tuple(ranges)
    ).all()
    return _read(rows, wanted)


def _read(rows: Iterable[Sequence[Any]], wanted: int) -> Changes:
    """What the rows of :data:`_SINCE` say, ``wanted`` numbered writes'
    worth (tuples, as the driver gives them)."""
    # Every numbered write left at least one row; fewer numbers than
    # wanted means rows were pruned.
    numbers = {(mine, seq) for mine, seq, *_ in rows}
    if len(numbers) != wanted:
        return EVERYTHING
    structure: set[int] = set()
    usage: set[int] = set()
    projects: set[int] = set()
    # Numbered writes that changed usage, and those that named projects.
    used: set[tuple[int, int]] = set()
    named: set[tuple[int, int]] = set()
    deltas: Counter[UsageKey] = Counter()
    names: dict[int, str] = {}
    unknown = False
    for mine, seq, kind, pid, user, type_id, rc, amount, name in rows:
        if pid is None:
            return EVERYTHING
        if kind == STRUCTURE:
            structure.add(pid)
        elif kind == PROJECT:
            projects.add(pid)
            names[pid] = name
            named.add((mine, seq))
            if user is None or amount is None:
                unknown = True  # a project row without amounts
            else:
                deltas[(pid, user, type_id, rc)] += int(amount)
        else:
            usage.add(pid)
            used.add((mine, seq))
    known = not unknown and used <= named
    return Changes(
        False,
        frozenset(structure),
        frozenset(usage),
        frozenset(projects) if known else None,
        deltas,
        names,
    )
