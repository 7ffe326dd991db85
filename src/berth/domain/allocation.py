"""Allocations: claiming, replacing and releasing resources.

The write path (``replace_allocations``) runs inside the caller's one
transaction, in this order, which is also the lock order (consumer rows,
then provider rows by id) so that concurrent claims do not deadlock:

1. resolve providers (400 for an unknown one) and, in the same
   statement, resource classes;
2. check and compare-and-swap each consumer's generation (409), creating
   new consumers and updating their project/user/type;
3. refuse an unknown resource class (400);
4. lock every provider whose allocations grow, or that loses a consumer
   being emptied, by moving its generation, in id order -- before
   reading any usage, so that the usage read sees every claim on it that
   committed before (one ``UPDATE ... RETURNING`` for them all on
   PostgreSQL, whose sub-query locks the rows in id order, and on
   SQLite, where the writer holds the whole file; one ``UPDATE`` each on
   MariaDB/MySQL);
5. delete the consumers' current allocations, check capacity against
   what is left (``berth.domain.claim``), insert the new ones;
6. delete consumers left without allocations.

Which providers get their generation bumped follows upstream exactly:
those named in the new allocations, plus those of a consumer that is
being emptied. A provider a consumer merely moves away from, and every
provider of a ``DELETE /allocations/{c}``, keeps its generation.

A lost race on a provider generation raises ``ProviderGenerationRace``;
``run_claim`` retries the whole transaction for it.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import changes, events
from berth.db import tables as t
from berth.db.engine import Database
from berth.domain import change, claim, common, consumer, errors, usage
from berth.domain.claim import Claim
from berth.domain.usage import Owner

T = TypeVar("T")

#: A consumer's owner before the write (None: created by it) and after.
_Owners = tuple["Owner | None", Owner]

PROVIDER_RACE_MESSAGE = (
    "Inventory and/or allocations changed while attempting to allocate: "
    "Another thread concurrently updated the resource provider data. "
    "Please retry your update")


@dataclass(slots=True)
class ConsumerAllocations:
    """What one consumer should hold after the write.

    ``allocations`` maps provider uuid -> {resource class: amount}; an
    empty dict removes everything the consumer holds. ``project_id`` and
    ``user_id`` are external ids. ``generation`` is checked only when
    ``check_generation`` is set (microversion 1.28 on): None then means
    "this consumer must not exist yet". ``consumer_type`` (1.38 on) sets
    the type; None leaves an existing consumer's type alone.
    """

    consumer_uuid: str
    allocations: dict[str, dict[str, int]]
    project_id: str
    user_id: str
    generation: int | None = None
    check_generation: bool = False
    consumer_type: str | None = None


def _provider_key(value: str) -> str:
    return common.normalize_uuid(value) or value


# The write path's statements are built once (each costs more to build
# than to run): its IN lists are expanding parameters.
_RP = t.resource_providers
_A = t.allocations
_RC = t.resource_classes
# Providers by uuid and classes by name in one statement (one round
# trip where there were two): ``kind`` 0 is a provider row, 1 a class.
_NAMED = (
    sa.select(_RP.c.id, _RP.c.uuid.label("key"),
              sa.literal_column("0").label("kind")).where(
        _RP.c.uuid.in_(sa.bindparam("uuids", expanding=True))),
    sa.select(_RC.c.id, _RC.c.name.label("key"),
              sa.literal_column("1").label("kind")).where(
        _RC.c.name.in_(sa.bindparam("names", expanding=True))))
_RESOLVE = sa.union_all(*_NAMED)
# The same for a write of one consumer (a PUT), with the consumer's
# look-up (``kind`` 2, one row per field): one round trip where there
# were three.
_RESOLVE_ONE = sa.union_all(*_NAMED, *consumer.look_up_rows(2))
_INSERT = _A.insert()
_DELETE_CONSUMER = t.consumers.delete().where(
    t.consumers.c.uuid == sa.bindparam("b_uuid"))
_DELETE = _A.delete().where(
    _A.c.consumer_id.in_(sa.bindparam("uuids", expanding=True)))
# The generation moves without a compare-and-swap: the UPDATE itself
# takes the row lock, so what it adds to is the latest committed value.
_BUMP = _RP.update().where(_RP.c.id == sa.bindparam("rp")).values(
    generation=_RP.c.generation + 1, updated_at=sa.bindparam("stamp"))
_GENERATIONS = sa.select(_RP.c.id, _RP.c.generation).where(
    _RP.c.id.in_(sa.bindparam("ids", expanding=True)))
_BUMP_ALL = _RP.update().values(
    generation=_RP.c.generation + 1, updated_at=sa.bindparam("stamp")
).returning(_RP.c.id, _RP.c.generation)
# SQLite: one writer holds the whole database (``BEGIN IMMEDIATE``), so
# the order rows are written in cannot deadlock anything.
_BUMP_ALL_SQLITE = _BUMP_ALL.where(
    _RP.c.id.in_(sa.bindparam("ids", expanding=True)))
# PostgreSQL: the sub-query takes the row locks in id order (its rows are
# locked as they leave the sort), as the one UPDATE per provider did.
_LOCKED = _RP.alias("locked")
_BUMP_ALL_ORDERED = _BUMP_ALL.where(_RP.c.id.in_(
    sa.select(_LOCKED.c.id).where(
        _LOCKED.c.id.in_(sa.bindparam("ids", expanding=True)))
    .order_by(_LOCKED.c.id).with_for_update()))


@dataclass(slots=True)
class _Resolved:
    """What a write's first statement read: provider uuid as given ->
    (id, stored uuid); class name -> id (of those that exist); and the
    consumer's look-up when the write has one consumer."""

    providers: dict[str, tuple[int, str]]
    classes: dict[str, int]
    consumer: consumer.Lookup | None


def _resolve(conn: Connection, requests: list[ConsumerAllocations]
             ) -> _Resolved:
    """Step 1 (unknown classes are raised for after the consumers, in
    upstream's order); 400 for a missing provider."""
    given = [u for r in requests for u in r.allocations]
    params: dict[str, Any] = {
        "uuids": sorted({_provider_key(u) for u in given}),
        "names": sorted({name for r in requests for resources in
                         r.allocations.values() for name in resources})}
    one = requests[0] if len(requests) == 1 else None
    if one is not None:
        params.update(uuid=one.consumer_uuid, project=one.project_id,
                      user=one.user_id, type=one.consumer_type)
    found: dict[str, tuple[int, str]] = {}
    classes: dict[str, int] = {}
    fields: dict[str, Any] = {}
    if one is not None or params["uuids"] or params["names"]:
        for id_, key, kind in conn.execute(
                _RESOLVE if one is None else _RESOLVE_ONE, params):
            if kind == 0:
                found[key] = (id_, key)
            elif kind == 1:
                classes[key] = id_
            else:
                fields[key] = id_
    result = {}
    for value in given:
        hit = found.get(_provider_key(value))
        if hit is None:
            raise errors.ProviderNotFoundForWrite(
                "Allocation for resource provider '%s' that does not exist."
                % value)
        result[value] = hit
    return _Resolved(result, classes, None if one is None else
                     consumer.lookup_of(one.consumer_uuid, fields))


def _ensure_consumer(conn: Connection, req: ConsumerAllocations,
                     found: consumer.Lookup | None
                     ) -> tuple[_Owners, bool] | None:
    """Check the generation and take the consumer for writing; the owner
    it had before (None: created here) and the one it has now, and
    whether any allocation may carry its uuid (False only for one
    created here that none does).

    Returns None for a consumer that does not exist and gets nothing
    (there is nothing to write or remove for it).
    """
    if found is None:
        found = consumer.look_up(conn, req.consumer_uuid, req.project_id,
                                 req.user_id, req.consumer_type)
    project = found.project_id
    if project is None:
        project = consumer.project_id(conn, req.project_id)
    user = found.user_id
    if user is None:
        user = consumer.user_id(conn, req.user_id)
    type_id = found.type_id
    if type_id is None and req.consumer_type is not None:
        type_id = consumer.consumer_type_id(conn, req.consumer_type)
    current = found.current
    if current is None:
        if req.check_generation and req.generation is not None:
            raise consumer.generation_conflict(None, req.generation)
        if not req.allocations:
            return None
        return (None, usage.owner_of(consumer.create(
            conn, req.consumer_uuid, project, user, type_id,
            generation=1))), found.holds
    if req.check_generation and current.generation != req.generation:
        raise consumer.generation_conflict(current.generation,
                                            req.generation)
    consumer.bump_generation(conn, current)
    before = usage.owner_of(current)
    if type_id is None:
        type_id = current.consumer_type_id
    consumer.update_owner(conn, current, project, user, type_id)
    return (before, usage.owner_of(current)), True


def _take_consumers(conn: Connection, requests: list[ConsumerAllocations],
                    found: consumer.Lookup | None
                    ) -> tuple[dict[str, _Owners], list[str]]:
    """Step 2, in consumer uuid order: the consumers this transaction
    holds (row-locked, or created here), each with its owner before and
    after, and those of them that allocations may carry.

    One that did not exist and gets nothing is left out: removing
    allocations a concurrent request gave it meanwhile would undo a
    write that committed after this one read the consumer missing.
    ``found`` is the look-up of a write's one consumer, already read
    (None: each consumer is looked up here).
    """
    owners: dict[str, _Owners] = {}
    holding: list[str] = []
    for req in sorted(requests, key=lambda r: r.consumer_uuid):
        taken = _ensure_consumer(conn, req, found)
        if taken is not None:
            owners[req.consumer_uuid] = taken[0]
            if taken[1]:
                holding.append(req.consumer_uuid)
    return owners, holding


def lock_providers(conn: Connection, provider_ids: set[int]) -> None:
    """Row-lock the providers in id order and bump their generations.

    The lock is taken before any usage is read, so capacity checks on one
    provider are serialized. A provider deleted meanwhile raises
    ProviderGenerationRace.
    """
    if not provider_ids:
        return
    stamp = common.now()
    ids = sorted(provider_ids)
    # The change feed's allocation events carry the new generations: one
    # UPDATE returns them all where the database can (SQLite, PostgreSQL);
    # else one UPDATE per provider, in id order, and one read after the
    # bumps (MySQL, MariaDB).
    name = conn.dialect.name
    if name in ("sqlite", "postgresql"):
        bumped = conn.execute(
            _BUMP_ALL_SQLITE if name == "sqlite" else _BUMP_ALL_ORDERED,
            {"ids": ids, "stamp": stamp}).all()
        if len(bumped) != len(ids):
            raise errors.ProviderGenerationRace(PROVIDER_RACE_MESSAGE)
    else:
        for provider_id in ids:
            if conn.execute(_BUMP, {"rp": provider_id, "stamp": stamp}
                            ).rowcount != 1:
                raise errors.ProviderGenerationRace(PROVIDER_RACE_MESSAGE)
        bumped = conn.execute(_GENERATIONS, {"ids": ids}).all()
    for provider_id, generation in bumped:
        events.note_generation(conn, provider_id, int(generation))
    changes.note(conn, changes.USAGE, provider_ids)


#: What consumers hold now, by consumer uuid (one read: the providers to
#: lock and note, the amounts the usage deltas subtract, and the change
#: feed's old value).
_Held = dict[str, change.Holding]


def _providers_of(held: _Held, uuids: Iterable[str]) -> set[int]:
    return {pid for u in uuids if u in held for pid in held[u].provider_ids}


def _lock(conn: Connection, claims: list[Claim], held: _Held,
          emptied: list[str]) -> None:
    """Step 4: lock the providers whose generation moves (those claimed
    on, and those of the ``emptied`` consumers)."""
    lock_providers(conn, {c.provider_id for c in claims}
                   | _providers_of(held, emptied))


def _claims(requests: list[ConsumerAllocations],
            providers: dict[str, tuple[int, str]]) -> list[Claim]:
    claims = []
    for req in requests:
        for given, resources in req.allocations.items():
            provider_id, provider_uuid = providers[given]
            claims += [Claim(provider_id, provider_uuid, name, amount,
                             req.consumer_uuid)
                       for name, amount in resources.items()]
    return claims


def _insert(conn: Connection, claims: list[Claim]) -> None:
    if not claims:
        return
    stamp = common.now()
    conn.execute(_INSERT, [
        {"resource_provider_id": c.provider_id, "consumer_id": c.consumer_uuid,
         "resource_class_id": c.class_id, "used": c.amount,
         "created_at": stamp} for c in claims])


def _note_usages(conn: Connection,
                 owners: dict[str, _Owners],
                 old: dict[str, dict[int, int]], claims: list[Claim]) -> None:
    """Note how the owners' usages change: each consumer in ``owners``
    held ``old`` under its first owner and holds ``claims`` under its
    second."""
    new: dict[str, Counter[int]] = {u: Counter() for u in owners}
    for c in claims:
        new[c.consumer_uuid][c.class_id] += c.amount
    changes.note_usage(conn, usage.deltas(
        (before, old.get(u, {}), after, new[u])
        for u, (before, after) in owners.items()))


def replace_allocations(conn: Connection,
                        requests: list[ConsumerAllocations]) -> None:
    """Replace all allocations of each consumer in ``requests``.

    Runs in the caller's transaction; on any error the caller's rollback
    leaves everything as it was.

    Raises ProviderNotFoundForWrite (400), ConcurrentUpdate (409, consumer
    generation), UnknownResourceClass (400), CapacityExceeded (409, bare
    upstream reason; callers add their prefix) and ProviderGenerationRace
    (409; retry the transaction, see :func:`run_claim`).
    """
    resolved = _resolve(conn, requests)
    owners, holding = _take_consumers(conn, requests, resolved.consumer)
    claims = _claims(requests, resolved.providers)
    claim.resolve_classes(claims, resolved.classes)
    emptied = [r.consumer_uuid for r in requests
               if not r.allocations and r.consumer_uuid in owners]
    # What the taken consumers hold now (one created here that no
    # allocation carries holds nothing: no statement for it).
    held = change.holdings(conn, holding)
    _lock(conn, claims, held, emptied)
    # Providers the consumers leave see their usage drop too.
    changes.note(conn, changes.USAGE, _providers_of(held, held))
    # What the consumers held counted in their owners' usages (those
    # created here had none: allocations without a consumer count nowhere).
    before = {u: h for u, h in held.items() if owners[u][0] is not None}
    old = {u: h.by_class for u, h in before.items()}
    if held:  # else they hold nothing (a new consumer): nothing to delete
        conn.execute(_DELETE, {"uuids": sorted(owners)})
    if claims:
        claim.check(conn, claims)
    _insert(conn, claims)
    consumer.delete_if_unused(conn, emptied)
    _note_usages(conn, owners, old, claims)
    _record(conn, requests, owners, claims, before)


def _record(conn: Connection, requests: list[ConsumerAllocations],
            owners: dict[str, _Owners], claims: list[Claim],
            before: dict[str, change.Holding]) -> None:
    """Record the change feed's event of each consumer written."""
    written = {r.consumer_uuid: change.Written(
        r.consumer_uuid, {}, {}, r.project_id, r.user_id, r.consumer_type, 1)
        for r in requests if r.consumer_uuid in owners}
    for c in claims:
        entry = written[c.consumer_uuid]
        entry.allocations.setdefault(c.provider_uuid, {})[c.class_name] = (
            c.amount)
        entry.provider_ids[c.provider_id] = c.provider_uuid
    for uuid, entry in sorted(written.items()):
        old = before.get(uuid)
        if owners[uuid][0] is not None and entry.allocations:
            if old is None:  # it held nothing: read what it is now
                old_row = consumer.get(conn, uuid)
                type_id = owners[uuid][1][2]
                entry.generation = old_row.generation if old_row else 1
                if entry.consumer_type is None and type_id is not None:
                    entry.consumer_type = consumer.names_of_types(
                        conn, [type_id]).get(type_id)
            else:
                entry.generation = (old.generation or 0)
                if entry.consumer_type is None:
                    entry.consumer_type = old.consumer_type
        change.allocations_event(conn, entry, old)


def run_claim(db: Database, fn: Callable[[Connection], T], attempts: int) -> T:
    """Run the write ``fn`` in its own transaction, retrying it whole (up
    to ``attempts`` times in all) when it loses a provider generation
    race; after the last loss, ConcurrentUpdate (409)."""
    for _ in range(max(attempts, 1)):
        try:
            return db.run(fn)
        except errors.ProviderGenerationRace:
            continue
    raise errors.ProviderGenerationRace(PROVIDER_RACE_MESSAGE)


def delete_for_consumer(conn: Connection, consumer_uuid: str) -> None:
    """Remove everything ``consumer_uuid`` holds, and the consumer.

    Takes the consumer's row lock first so that a concurrent write to
    the same consumer is ordered before or after this one. Provider
    generations do not move (as upstream). NotFound (404) when the
    consumer holds nothing.
    """
    owner = consumer.get(conn, consumer_uuid, lock=True)
    held = change.holdings(conn, [consumer_uuid]).get(consumer_uuid)
    if held is None:
        raise errors.NotFound("No allocations for consumer '%s'"
                              % consumer_uuid)
    changes.note(conn, changes.USAGE, set(held.provider_ids))
    # Allocations without a consumer row count in no project; their
    # usage rows alone then make every project's kept answers go.
    if owner is not None:
        changes.note_usage(conn, usage.deltas(
            [(usage.owner_of(owner), held.by_class, usage.owner_of(owner),
              {})]))
    change.removed_event(conn, consumer_uuid, held)
    conn.execute(_DELETE, {"uuids": [consumer_uuid]})
    conn.execute(_DELETE_CONSUMER, {"b_uuid": consumer_uuid})


@dataclass(slots=True)
class ConsumerView:
    """What ``GET /allocations/{consumer}`` shows."""

    allocations: dict[str, dict[str, Any]] = field(default_factory=dict)
    project_id: str | None = None
    user_id: str | None = None
    generation: int | None = None
    consumer_type: str = consumer.UNKNOWN_TYPE
    last_modified: dt.datetime | None = None


def for_consumer(conn: Connection, consumer_uuid: str) -> ConsumerView:
    """The consumer's allocations by provider uuid, with its owner.

    ``project_id``/``user_id`` are None for allocations whose consumer
    record is missing (legacy data); callers show the configured
    incomplete-consumer ids for them.
    """
    a, rp, rc = t.allocations, t.resource_providers, t.resource_classes
    c, p, u = t.consumers, t.projects, t.users
    ct = t.consumer_types
    query = (sa.select(rp.c.uuid, rp.c.generation, rc.c.name, a.c.used,
                       a.c.created_at, a.c.updated_at,
                       p.c.external_id.label("project_id"),
                       u.c.external_id.label("user_id"),
                       c.c.generation.label("consumer_generation"),
                       ct.c.name.label("consumer_type"))
             .select_from(a.join(rp, rp.c.id == a.c.resource_provider_id)
                          .join(rc, rc.c.id == a.c.resource_class_id)
                          .outerjoin(c, c.c.uuid == a.c.consumer_id)
                          .outerjoin(p, p.c.id == c.c.project_id)
                          .outerjoin(u, u.c.id == c.c.user_id)
                          .outerjoin(ct, ct.c.id == c.c.consumer_type_id))
             .where(a.c.consumer_id == consumer_uuid)
             .order_by(rp.c.uuid, rc.c.name))
    view = ConsumerView()
    for row in conn.execute(query):
        entry = view.allocations.setdefault(
            row.uuid, {"generation": row.generation, "resources": {}})
        entry["resources"][row.name] = row.used
        view.last_modified = _later(view.last_modified,
                                    row.updated_at or row.created_at)
        view.project_id, view.user_id = row.project_id, row.user_id
        view.generation = row.consumer_generation
        view.consumer_type = row.consumer_type or consumer.UNKNOWN_TYPE
    return view


def _later(a: dt.datetime | None, b: dt.datetime | None) -> dt.datetime | None:
    if a is None or (b is not None and b > a):
        return b
    return a


def for_provider(conn: Connection, provider_id: int
                 ) -> tuple[dict[str, dict[str, Any]], dt.datetime | None]:
    """Allocations on one provider by consumer uuid, each with its
    ``resources`` and ``consumer_generation`` (None for a consumer record
    that is missing), and the newest allocation timestamp."""
    a, rc, c = t.allocations, t.resource_classes, t.consumers
    query = (sa.select(a.c.consumer_id, rc.c.name, a.c.used, c.c.generation,
                       a.c.created_at, a.c.updated_at)
             .select_from(a.join(rc, rc.c.id == a.c.resource_class_id)
                          .outerjoin(c, c.c.uuid == a.c.consumer_id))
             .where(a.c.resource_provider_id == provider_id)
             .order_by(a.c.consumer_id, rc.c.name))
    result: dict[str, dict[str, Any]] = {}
    newest: dt.datetime | None = None
    # A shared provider may hold thousands: unpacked, which costs a tenth
    # of reading each column by attribute.
    for uuid, class_name, used, generation, created, updated in conn.execute(
            query):
        entry = result.setdefault(uuid, {"resources": {},
                                         "consumer_generation": generation})
        entry["resources"][class_name] = used
        newest = _later(newest, updated or created)
    return result, newest
