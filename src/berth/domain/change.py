"""The change feed: the events domain writers record, and reading them.

Writers call the recorders here beside the notes they make for the caches;
``berth.db.events`` keeps the log and ``berth.db.changes.flush`` writes it
in the write's transaction (docs/change-feed.md). Each event carries the
subject's whole new value and its old one, so that replaying the events
after a listing's position gives today's state, and replaying one twice
changes nothing.

Recording costs a write little: an allocation write for a new consumer
reads nothing more (everything is in hand); one that replaces or removes
an existing consumer's allocations reads them once, before they go; a
provider's inventories, traits or aggregates are read before and after
their change (:func:`watching`).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import events
from berth.db import tables as t
from berth.db.events import Event, Filters, Page
from berth.domain import errors

RP = t.resource_providers
_ROOT = RP.alias("feed_root")

INVENTORIES = events.INVENTORIES_SET
TRAITS = events.TRAITS_SET
AGGREGATES = events.AGGREGATES_SET


def provider_value(row: Any) -> dict[str, Any]:
    """A provider's event value, from a row with the columns of
    ``resource_provider.get_provider``."""
    return {"name": row.name, "generation": int(row.generation),
            "parent_provider_uuid": row.parent_provider_uuid,
            "root_provider_uuid": row.root_provider_uuid}


def provider_event(conn: Connection, kind: str, uuid: str, new: Any,
                   old: Any) -> None:
    """Record a provider created, updated (renamed or moved) or deleted:
    ``new`` and ``old`` are rows as for :func:`provider_value`, or None."""
    value = (new if new is not None else old)
    events.record(conn, Event(
        kind, uuid, None if new is None else provider_value(new),
        None if old is None else provider_value(old),
        tree=value.root_provider_uuid))


def name_event(conn: Connection, kind: str, name: str,
               old: str | None = None) -> None:
    """Record a resource class or trait created, renamed or deleted."""
    deleted = kind in (events.RESOURCE_CLASS_DELETED, events.TRAIT_DELETED)
    events.record(conn, Event(
        kind, name, None if deleted else {"name": name},
        {"name": old if old is not None else name}
        if deleted or old is not None else None))


def _snapshot(conn: Connection, provider: int | str, what: str
              ) -> tuple[str, str | None, dict[str, Any]] | None:
    """(uuid, root uuid, value) of one provider's ``what`` (the provider
    by id or uuid), or None when there is no such provider."""
    head = conn.execute(
        sa.select(RP.c.id, RP.c.uuid, RP.c.generation,
                  _ROOT.c.uuid.label("root"))
        .select_from(RP.outerjoin(_ROOT, _ROOT.c.id == RP.c.root_provider_id))
        .where(RP.c.id == provider if isinstance(provider, int)
               else RP.c.uuid == provider)).first()
    if head is None:
        return None
    provider_id = head.id
    value: dict[str, Any] = {"generation": int(head.generation)}
    if what == INVENTORIES:
        inv, rc = t.inventories, t.resource_classes
        fields = ("total", "reserved", "min_unit", "max_unit", "step_size",
                  "allocation_ratio")
        rows = conn.execute(
            sa.select(rc.c.name, *[inv.c[f] for f in fields])
            .join(rc, rc.c.id == inv.c.resource_class_id)
            .where(inv.c.resource_provider_id == provider_id)
            .order_by(rc.c.name))
        value["inventories"] = {
            row.name: {f: (float(row._mapping[f]) if f == "allocation_ratio"
                           else int(row._mapping[f])) for f in fields}
            for row in rows}
    elif what == TRAITS:
        link, tr = t.resource_provider_traits, t.traits
        value["traits"] = sorted(conn.scalars(
            sa.select(tr.c.name).join(link, link.c.trait_id == tr.c.id)
            .where(link.c.resource_provider_id == provider_id)))
    else:
        link, agg = t.resource_provider_aggregates, t.placement_aggregates
        value["aggregates"] = sorted(conn.scalars(
            sa.select(agg.c.uuid).join(link, link.c.aggregate_id == agg.c.id)
            .where(link.c.resource_provider_id == provider_id)))
    return head.uuid, head.root, value


@contextmanager
def watching(conn: Connection, providers: Iterable[int | str],
             what: str) -> Iterator[None]:
    """Record, for each provider (by id or uuid), its ``what``
    (``INVENTORIES``, ``TRAITS`` or ``AGGREGATES``) as set by the body of
    the ``with``, if the body changed it (and its old value)."""
    ids = list(dict.fromkeys(providers))
    before = {pid: _snapshot(conn, pid, what) for pid in ids}
    yield
    for pid in ids:
        after, old = _snapshot(conn, pid, what), before[pid]
        if after is None or after == old:
            continue
        uuid, root, value = after
        events.record(conn, Event(what, uuid, value,
                                  None if old is None else old[2],
                                  tree=root))


@dataclass(slots=True)
class Holding:
    """What one consumer holds, and its owner, as the feed shows them."""

    allocations: dict[str, dict[str, int]]
    provider_ids: dict[int, str]
    project_id: str | None
    user_id: str | None
    consumer_type: str | None
    generation: int | None
    #: Resource class id -> amount over every provider (what the usage
    #: deltas subtract: ``usage.held_amounts``'s answer, for free).
    by_class: dict[int, int]


_A, _RC, _C = t.allocations, t.resource_classes, t.consumers
#: Built once (every allocation write that replaces or removes runs it).
_HOLDINGS = (
    sa.select(_A.c.consumer_id, RP.c.id, RP.c.uuid, _RC.c.id, _RC.c.name,
              _A.c.used, t.projects.c.external_id.label("project"),
              t.users.c.external_id.label("user"),
              t.consumer_types.c.name.label("type"), _C.c.generation)
    .select_from(
        _A.join(RP, RP.c.id == _A.c.resource_provider_id)
        .join(_RC, _RC.c.id == _A.c.resource_class_id)
        .outerjoin(_C, _C.c.uuid == _A.c.consumer_id)
        .outerjoin(t.projects, t.projects.c.id == _C.c.project_id)
        .outerjoin(t.users, t.users.c.id == _C.c.user_id)
        .outerjoin(t.consumer_types,
                   t.consumer_types.c.id == _C.c.consumer_type_id))
    .where(_A.c.consumer_id.in_(sa.bindparam("uuids", expanding=True))))


def holdings(conn: Connection, consumer_uuids: Iterable[str]
             ) -> dict[str, Holding]:
    """Per consumer (those holding something), its allocations and owner:
    one statement, none for no consumer. Read before a write replaces or
    removes them."""
    wanted = sorted(set(consumer_uuids))
    if not wanted:
        return {}
    rows = conn.execute(_HOLDINGS, {"uuids": wanted})
    found: dict[str, Holding] = {}
    for (consumer, pid, puuid, class_id, name, used, project, user, kind,
         gen) in rows:
        held = found.get(consumer)
        if held is None:
            held = found[consumer] = Holding(
                {}, {}, project, user, kind,
                None if gen is None else int(gen), {})
        held.allocations.setdefault(puuid, {})[name] = int(used)
        held.provider_ids[int(pid)] = puuid
        held.by_class[class_id] = held.by_class.get(class_id, 0) + int(used)
    return found


@dataclass(slots=True)
class Written:
    """One consumer's allocations as a write left them."""

    consumer_uuid: str
    allocations: dict[str, dict[str, int]]
    provider_ids: dict[int, str]
    project_id: str
    user_id: str
    consumer_type: str | None
    generation: int


def allocations_event(conn: Connection, written: Written,
                      old: Holding | None) -> None:
    """Record a consumer's allocations replaced (or, with none left,
    removed), with the generations the write gave its providers."""
    bumped = events.generations(conn)
    providers = {**(old.provider_ids if old else {}), **written.provider_ids}
    generations = {uuid: bumped[pid] for pid, uuid in sorted(
        providers.items(), key=lambda item: item[1]) if pid in bumped}
    old_value = None if old is None else {
        "allocations": old.allocations, "project_id": old.project_id,
        "user_id": old.user_id, "consumer_type": old.consumer_type}
    if written.allocations:
        kind = events.ALLOCATIONS_REPLACED
        new: dict[str, Any] = {
            "allocations": written.allocations,
            "project_id": written.project_id, "user_id": written.user_id,
            "consumer_type": written.consumer_type,
            "consumer_generation": written.generation}
        project = written.project_id
    else:
        kind = events.ALLOCATIONS_REMOVED
        new = {"allocations": {}}
        project = (old.project_id if old else None) or written.project_id
    new["resource_provider_generations"] = generations
    events.record(conn, Event(kind, written.consumer_uuid, new, old_value,
                              project=project))


def removed_event(conn: Connection, consumer_uuid: str,
                  old: Holding) -> None:
    """Record ``DELETE /allocations/{consumer}`` (no generation moves)."""
    events.record(conn, Event(
        events.ALLOCATIONS_REMOVED, consumer_uuid,
        {"allocations": {}, "resource_provider_generations": {}},
        {"allocations": old.allocations, "project_id": old.project_id,
         "user_id": old.user_id, "consumer_type": old.consumer_type},
        project=old.project_id))


def read(conn: Connection, after: Mapping[int, int], filters: Filters,
         trees: Collection[str] | None, limit: int) -> Page:
    """The events after ``after`` that pass ``filters`` and, with
    ``trees`` (each the uuid of any provider of a tree, or of a deleted
    tree's root), are about one of those trees: their providers' events
    (a provider moved out of one included), allocation events naming one
    of their providers (those in them now, or named by this page's events
    of them), and the events that change every tree (``_EVERY_TREE``).
    Raises ``events.Gone``."""
    page = events.read(conn, after, filters, limit)
    if trees is None:
        return page
    wanted = sorted(set(trees))
    found = {uuid: root for uuid, root in conn.execute(
        sa.select(RP.c.uuid, _ROOT.c.uuid).select_from(
            RP.join(_ROOT, _ROOT.c.id == RP.c.root_provider_id))
        .where(RP.c.uuid.in_(wanted)))}
    roots = {found.get(tree, tree) for tree in wanted}
    members = set(conn.scalars(sa.select(RP.c.uuid).select_from(
        RP.join(_ROOT, _ROOT.c.id == RP.c.root_provider_id))
        .where(_ROOT.c.uuid.in_(sorted(roots)))))
    members |= {e.subject for e in page.events
                if e.tree in roots and e.subject is not None}
    kept = [e for e in page.events
            if e.tree in roots or e.kind in _EVERY_TREE
            or (e.kind == events.PROVIDER_UPDATED
                and (e.old or {}).get("root_provider_uuid") in roots)
            or (e.kind in events.ALLOCATION_KINDS
                and _names_any(e, members))]
    return Page(kept, page.upto, page.more)


#: Events every tree filter passes: a custom class renamed (inventories
#: and allocations name it anew) and a write no event describes.
_EVERY_TREE = frozenset((events.RESOURCE_CLASS_UPDATED, events.RESYNC))


def _names_any(event: events.Stored, providers: set[str]) -> bool:
    named = set((event.new or {}).get("allocations", {}))
    named |= set((event.old or {}).get("allocations", {}))
    return not named.isdisjoint(providers)


def format_position(seqs: Mapping[int, int]) -> str:
    """A position as clients see it: ``slot:seq`` pairs by slot, comma
    separated (``1:42`` on a single database server); ``0`` before the
    first write."""
    pairs = sorted((slot, seq) for slot, seq in seqs.items() if seq)
    return ",".join("%d:%d" % pair for pair in pairs) or "0"


def parse_position(text: str) -> dict[int, int]:
    """The slot -> seq map of a position :func:`format_position` wrote;
    ``errors.QueryBadValue`` (400) for anything else."""
    if text == "0":
        return {}
    found: dict[int, int] = {}
    for pair in text.split(","):
        slot, colon, seq = pair.partition(":")
        if not (colon and slot.isdigit() and seq.isdigit()
                and len(slot) < 12 and len(seq) < 19 and int(slot) not in found):
            raise errors.QueryBadValue(
                "Invalid position %r: expected slot:number pairs separated "
                "by commas (as the Berth-Position header gives them), or 0."
                % text)
        found[int(slot)] = int(seq)
    return found


def read_feed(conn: Connection, after: str, filters: Filters,
              trees: Collection[str] | None, limit: int) -> Page:
    """:func:`read` from a position as clients write it; QueryBadValue
    (400) for a malformed one, HistoryGone (410, naming the oldest
    position kept) when the events after it are no longer kept."""
    seqs = parse_position(after)
    try:
        return read(conn, seqs, filters, trees, limit)
    except events.Gone as gone:
        oldest = format_position(gone.oldest)
        raise errors.HistoryGone(
            "The change feed no longer holds the events after position %s "
            "(the oldest position it can read on from is %s): list again "
            "and read on from the position the listing gives."
            % (after, oldest), oldest) from None
