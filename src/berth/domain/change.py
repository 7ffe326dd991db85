"""The change feed: the events domain writers record, and reading them.

Writers call the recorders here beside the notes they make for the caches;
``berth.db.events`` keeps the log and ``berth.db.changes.flush`` writes it
in the write's transaction (docs/change-feed.md). Each event carries the
subject's whole new value and its old one, so that replaying the events
after a listing's position gives today's state, and replaying one twice
changes nothing.

Recording costs a write little: an allocation write for a new consumer
reads nothing more (everything is in hand); one that replaces or removes
an existing consumer's allocations reads them once, before they go (a
read that also gives the providers to lock and the usage to subtract);
a provider's inventories, traits or aggregates writer reads the old
ones once, as it must to write the new, and passes both
(:func:`set_event`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import events
from berth.db import tables as t
from berth.db.events import Event, EventPage, Filters
from berth.domain import common, errors
from berth.position import Position

RP = t.resource_providers
_ROOT = RP.alias("feed_root")

INVENTORIES = events.INVENTORIES_SET
TRAITS = events.TRAITS_SET
AGGREGATES = events.AGGREGATES_SET


def provider_value(row: Any) -> dict[str, Any]:
    """A provider's event value, from a row with the columns of
    ``resource_provider.get_provider``."""
    return {
        "name": row.name,
        "generation": int(row.generation),
        "parent_provider_uuid": row.parent_provider_uuid,
        "root_provider_uuid": row.root_provider_uuid,
    }


def provider_event(conn: Connection, kind: str, uuid: str, new: Any, old: Any) -> None:
    """Record a provider created, updated (renamed or moved) or deleted:
    ``new`` and ``old`` are rows as for :func:`provider_value`, or None."""
    value = new if new is not None else old
    events.record(
        conn,
        Event(
            kind,
            uuid,
            None if new is None else provider_value(new),
            None if old is None else provider_value(old),
            tree=value.root_provider_uuid,
        ),
    )


def name_event(conn: Connection, kind: str, name: str, old: str | None = None) -> None:
    """Record a resource class or trait created, renamed or deleted."""
    deleted = kind in (events.RESOURCE_CLASS_DELETED, events.TRAIT_DELETED)
    events.record(
        conn,
        Event(
            kind,
            name,
            None if deleted else {"name": name},
            {"name": old if old is not None else name} if deleted or old is not None else None,
        ),
    )


#: The key of each kind's value beside the provider's generation.
_KEYS = {INVENTORIES: "inventories", TRAITS: "traits", AGGREGATES: "aggregates"}


def inventories_value(inventories: Mapping[str, Any]) -> dict[str, Any]:
    """A provider's inventories (``capacity.Inventory`` by class name) as
    its inventories event shows them."""
    return {
        name: {
            field: (float(value) if field == "allocation_ratio" else int(value))
            for field, value in inv._asdict().items()
        }
        for name, inv in sorted(inventories.items())
    }


def set_event(
    conn: Connection, what: str, provider: Any, old: tuple[int, Any], new: tuple[int, Any]
) -> None:
    """Record a provider's ``what`` (``INVENTORIES``, ``TRAITS`` or
    ``AGGREGATES``) replaced, unless nothing changed. ``provider`` is a
    row with its ``uuid`` and ``root_uuid``; ``old`` and ``new`` are
    (generation, content): the content an :func:`inventories_value`, or
    sorted trait names or aggregate uuids. The writers know both (they
    read the old content anyway to write the new), so recording reads
    nothing."""
    if old == new:
        return
    key = _KEYS[what]
    events.record(
        conn,
        Event(
            what,
            provider.uuid,
            {"generation": new[0], key: new[1]},
            {"generation": old[0], key: old[1]},
            tree=provider.root_uuid or provider.uuid,
        ),
    )


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

    def add(
        self, provider_id: int, provider_uuid: str, class_id: int, name: str, used: int
    ) -> None:
        """Count one allocation row (``used`` of class ``name`` on the
        provider) into what the consumer holds."""
        self.allocations.setdefault(provider_uuid, {})[name] = used
        self.provider_ids[provider_id] = provider_uuid
        self.by_class[class_id] = self.by_class.get(class_id, 0) + used


_A, _RC, _C = t.allocations, t.resource_classes, t.consumers
#: Built once (every allocation write that replaces or removes runs it).
_HOLDINGS = (
    sa.select(
        _A.c.consumer_id,
        RP.c.id,
        RP.c.uuid,
        _RC.c.id,
        _RC.c.name,
        _A.c.used,
        t.projects.c.external_id.label("project"),
        t.users.c.external_id.label("user"),
        t.consumer_types.c.name.label("type"),
        _C.c.generation,
    )
    .select_from(
        _A.join(RP, RP.c.id == _A.c.resource_provider_id)
        .join(_RC, _RC.c.id == _A.c.resource_class_id)
        .outerjoin(_C, _C.c.uuid == _A.c.consumer_id)
        .outerjoin(t.projects, t.projects.c.id == _C.c.project_id)
        .outerjoin(t.users, t.users.c.id == _C.c.user_id)
        .outerjoin(t.consumer_types, t.consumer_types.c.id == _C.c.consumer_type_id)
    )
    .where(_A.c.consumer_id.in_(sa.bindparam("uuids", expanding=True)))
)


def holdings(conn: Connection, consumer_uuids: Iterable[str]) -> dict[str, Holding]:
    """Per consumer (those holding something), its allocations and owner:
    one statement, none for no consumer. Read before a write replaces or
    removes them."""
    wanted = sorted(set(consumer_uuids))
    if not wanted:
        return {}
    rows = conn.execute(_HOLDINGS, {"uuids": wanted})
    found: dict[str, Holding] = {}
    for consumer, pid, puuid, class_id, name, used, project, user, kind, gen in rows:
        held = found.get(consumer)
        if held is None:
            held = found[consumer] = Holding(
                {}, {}, project, user, kind, None if gen is None else int(gen), {}
            )
        held.add(int(pid), puuid, class_id, name, int(used))
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


def allocations_event(conn: Connection, written: Written, old: Holding | None) -> None:
    """Record a consumer's allocations replaced (or, with none left,
    removed), with the generations the write gave its providers."""
    bumped = events.generations(conn)
    providers = {**(old.provider_ids if old else {}), **written.provider_ids}
    generations = {
        uuid: bumped[pid]
        for pid, uuid in sorted(providers.items(), key=lambda item: item[1])
        if pid in bumped
    }
    old_value = (
        None
        if old is None
        else {
            "allocations": old.allocations,
            "project_id": old.project_id,
            "user_id": old.user_id,
            "consumer_type": old.consumer_type,
        }
    )
    if written.allocations:
        kind = events.ALLOCATIONS_REPLACED
        new: dict[str, Any] = {
            "allocations": written.allocations,
            "project_id": written.project_id,
            "user_id": written.user_id,
            "consumer_type": written.consumer_type,
            "consumer_generation": written.generation,
        }
        project = written.project_id
    else:
        kind = events.ALLOCATIONS_REMOVED
        new = {"allocations": {}}
        project = (old.project_id if old else None) or written.project_id
    new["resource_provider_generations"] = generations
    events.record(conn, Event(kind, written.consumer_uuid, new, old_value, project=project))


def removed_event(conn: Connection, consumer_uuid: str, old: Holding) -> None:
    """Record ``DELETE /allocations/{consumer}`` (no generation moves)."""
    events.record(
        conn,
        Event(
            events.ALLOCATIONS_REMOVED,
            consumer_uuid,
            {"allocations": {}, "resource_provider_generations": {}},
            {
                "allocations": old.allocations,
                "project_id": old.project_id,
                "user_id": old.user_id,
                "consumer_type": old.consumer_type,
            },
            project=old.project_id,
        ),
    )


def read(
    conn: Connection, after: Position, filters: Filters, trees: Collection[str] | None, limit: int
) -> EventPage:
    """The events after ``after`` that pass ``filters`` and, with
    ``trees`` (each the uuid of any provider of a tree, or of a deleted
    tree's root), are about one of those trees: their providers' events
    (a provider moved out of one included), allocation events naming one
    of their providers (those in them now, or named by this page's events
    of them), and the events that change every tree (``_EVERY_TREE``).
    Raises ``events.Gone``."""
    if trees is None:
        return events.read(conn, after, filters, limit)
    roots = _roots(conn, trees)
    # Only the named trees' events and those that may be about any tree
    # are read (and decoded); which of those are about the trees is
    # judged here.
    page = events.read(
        conn,
        after,
        dataclasses.replace(filters, trees=frozenset(roots), any_tree=_ANY_TREE),
        limit,
    )
    return EventPage(_about(conn, page.events, roots), page.upto, page.more)


def of_tree(
    conn: Connection, found: list[events.Stored], trees: Collection[str]
) -> list[events.Stored]:
    """Those of ``found`` (events read together) about one of ``trees``
    (as for :func:`read`)."""
    return _about(conn, found, _roots(conn, trees))


def _roots(conn: Connection, trees: Collection[str]) -> set[str]:
    """The root uuids of ``trees`` (a uuid no provider has: itself, the
    root of a deleted tree)."""
    wanted = sorted(set(trees))
    roots_of = {
        uuid: root
        for uuid, root in conn.execute(
            sa.select(RP.c.uuid, _ROOT.c.uuid)
            .select_from(RP.join(_ROOT, _ROOT.c.id == RP.c.root_provider_id))
            .where(RP.c.uuid.in_(wanted))
        )
    }
    return {roots_of.get(tree, tree) for tree in wanted}


def _about(conn: Connection, found: list[events.Stored], roots: set[str]) -> list[events.Stored]:
    members: set[str] = set()
    if any(e.kind in events.ALLOCATION_KINDS for e in found):
        # Allocations name providers, not trees: the trees' providers.
        members = set(
            conn.scalars(
                sa.select(RP.c.uuid)
                .select_from(RP.join(_ROOT, _ROOT.c.id == RP.c.root_provider_id))
                .where(_ROOT.c.uuid.in_(sorted(roots)))
            )
        )
        members |= {e.subject for e in found if e.tree in roots and e.subject is not None}
    return [
        e
        for e in found
        if e.tree in roots
        or e.kind in _EVERY_TREE
        or (e.kind == events.PROVIDER_UPDATED and (e.old or {}).get("root_provider_uuid") in roots)
        or (e.kind in events.ALLOCATION_KINDS and _names_any(e, members))
    ]


#: Events every tree filter passes: a custom class renamed (inventories
#: and allocations name it anew) and a write no event describes.
_EVERY_TREE = frozenset((events.RESOURCE_CLASS_UPDATED, events.RESYNC))
#: Events about a tree whatever their ``tree`` column says: those above,
#: a provider moved out of it (its old root), allocations (no tree).
_ANY_TREE = _EVERY_TREE | {events.PROVIDER_UPDATED, *events.ALLOCATION_KINDS}


def _names_any(event: events.Stored, providers: set[str]) -> bool:
    named = set((event.new or {}).get("allocations", {}))
    named |= set((event.old or {}).get("allocations", {}))
    return not named.isdisjoint(providers)


#: The project of the whole feed's policy target: no caller's project is
#: this, so ``project_id:%(project_id)s`` never matches it (not even a
#: caller with no project, whose project reads as "None" to oslo.policy).
EVERY_PROJECT = "(every project)"


def feed_filters(
    kinds: frozenset[str] | None,
    consumer: str | None,
    project: str | None,
    authorize: Callable[[str], None],
) -> Filters:
    """The filters a reader asked for, narrowed to what it may read.

    ``authorize(project)`` raises ``errors.Forbidden`` unless policy lets
    the caller read the feed of ``project`` (:data:`EVERY_PROJECT`: the
    whole feed). A caller refused the whole feed may still read its own
    project's allocation events when it names that project (a project
    reader); otherwise Forbidden (403). The one narrowing of
    ``GET /berth/changes`` and of its watch form (``berth.serve.watch``).
    """
    try:  # the whole feed
        authorize(EVERY_PROJECT)
    except errors.Forbidden:
        # A project reader: only its own project's consumers, named.
        if project is None:
            raise
        authorize(project)
        allowed = frozenset(events.ALLOCATION_KINDS)
        kinds = allowed if kinds is None else kinds & allowed
    return Filters(
        kinds,
        None if consumer is None else frozenset([common.normalize_uuid(consumer) or consumer]),
        project,
    )


def passes(filters: Filters, event: events.Stored) -> bool:
    """Whether ``event`` passes ``filters`` (what ``events.read`` asks
    the database, for events already in hand)."""
    return (
        (filters.kinds is None or event.kind in filters.kinds)
        and (filters.subjects is None or event.subject in filters.subjects)
        and (filters.project is None or event.project == filters.project)
    )


def parse_position(text: str) -> Position:
    """The position a client wrote (as the ``Berth-Position`` header
    gives it); ``errors.QueryBadValue`` (400) for anything else."""
    try:
        return Position.parse(text)
    except ValueError:
        raise errors.QueryBadValue(
            "Invalid position %r: expected slot:number pairs separated "
            "by commas (as the Berth-Position header gives them), or 0." % text
        ) from None


def read_feed(
    conn: Connection, after: str, filters: Filters, trees: Collection[str] | None, limit: int
) -> EventPage:
    """:func:`read` from a position as clients write it; QueryBadValue
    (400) for a malformed one, HistoryGone (410, naming the oldest
    position kept) when the events after it are no longer kept or it is
    ahead of the database (:func:`_gone_error`)."""
    position = parse_position(after)
    try:
        return read(conn, position, filters, trees, limit)
    except events.Gone as gone:
        raise _gone_error(after, gone) from None


def _gone_error(after: str, gone: events.Gone) -> errors.HistoryGone:
    """The 410 for a reader whose position ``after`` the feed cannot read
    on from: one line, saying whether the history was pruned or the
    position is ahead of the database (a restored backup, another
    database), and that the reader must list again."""
    oldest = str(gone.oldest)
    if gone.ahead:
        return errors.HistoryGone(
            "Position %s is ahead of this database (at %s): was it "
            "restored from a backup? List again and read on from the "
            "position the listing gives." % (after, gone.current),
            oldest,
        )
    return errors.HistoryGone(
        "The change feed no longer holds the events after position %s "
        "(the oldest position it can read on from is %s): list again and "
        "read on from the position the listing gives." % (after, oldest),
        oldest,
    )
