"""Allocations: claiming, replacing and releasing resources.

The write path (``replace_allocations``) runs inside the caller's one
transaction, in this order, which is also the lock order (consumer rows,
then provider rows by id) so that concurrent claims do not deadlock:

1. one unlocked read (``allocation_read.first_read``, where the reads
   of ``GET`` are too): providers (400 for an unknown one), resource
   classes, the owners the request names, and every consumer with what
   it holds;
2. check each consumer's generation against the request (409); create
   the new consumers, then bump the generations of the existing ones
   (``consumer.bump_generations``: a compare-and-swap against the
   generation read in step 1, 409 when another write moved it first),
   each in uuid order and in one statement however many there are, and
   update their project/user/type;
3. refuse an unknown resource class (400);
4. lock every provider whose allocations grow, or that loses a consumer
   being emptied, by moving its generation, in id order
   (``claim.lock_providers``: ``generation = generation + 1``, no
   compare-and-swap: the UPDATE waits for the row lock) -- before
   reading any usage, so that the usage read sees every claim on it that
   committed before (one ``UPDATE ... RETURNING`` for them all on
   PostgreSQL, whose sub-query locks the rows in id order, and on
   SQLite, where the writer holds the whole file; one ``UPDATE`` each on
   MariaDB/MySQL);
5. delete the consumers' current allocations, check capacity against
   what is left (``berth.domain.claim``), insert the new ones;
6. delete consumers left without allocations.

``DELETE /allocations/{c}`` takes the same consumer row lock, by
deleting the row it read unlocked (if still at the generation read),
then deletes the allocations.

What a consumer holds is read before its row is locked, in the read
that gives its generation, and trusted once the lock is taken at that
generation (step 2's compare-and-swap, the DELETE's ``generation =``):
an unchanged consumer id and generation mean unchanged allocations.
Every write of a consumer's allocations takes its row first and moves
that: this function (``PUT`` and ``POST /allocations``, and
``berth.domain.reshaper``) bumps the generation of a consumer that
exists (emptied ones too, deleted after), or creates the row (a new id;
a concurrent creator gets 409 from the unique uuid); a ``DELETE``
deletes the row. Ids are not reused while a transaction runs (sequences
on PostgreSQL, InnoDB's counter; SQLite may reuse a deleted row's id,
but its one writer holds the whole file from the first read on).
Nothing else changes allocations but ``berth db import --replace``,
which replaces the whole database (an operator's migration step): a
provider or class in use cannot be deleted. Allocations that no consumer
row carries (legacy data) are read again once their row is created, and
their ``DELETE`` takes the path that locks first.

Which providers get their generation bumped follows upstream exactly:
those named in the new allocations, plus those of a consumer that is
being emptied. A provider a consumer merely moves away from, and every
provider of a ``DELETE /allocations/{c}``, keeps its generation.

No provider generation can be lost to a race here: nothing compares
it. What step 4 can meet is a provider deleted after step 1 read it,
which raises ``ClaimedProviderDeleted``; ``run_claim`` runs the whole
transaction again for it (``[placement]
allocation_conflict_retry_count`` times in all), and the next attempt's
step 1 usually answers 400 for the provider that is gone.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import changes
from berth.db import tables as t
from berth.db.engine import Database
from berth.domain import allocation_read, change, claim, common, consumer, errors, usage
from berth.domain.claim import Claim
from berth.domain.consumer import Owner

T = TypeVar("T")

#: A consumer's owner before the write (None: created by it) and after.
_Owners = tuple["Owner | None", Owner]


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
_A = t.allocations

_DELETE_CONSUMER = t.consumers.delete().where(t.consumers.c.uuid == sa.bindparam("b_uuid"))
_DELETE = _A.delete().where(_A.c.consumer_id.in_(sa.bindparam("uuids", expanding=True)))


@dataclass(slots=True)
class _Resolved:
    """What a write's first statement read: provider uuid as given ->
    (id, stored uuid); class name -> id (of those that exist); and what
    it found of the consumers and the owners the request names."""

    providers: dict[str, tuple[int, str]]
    classes: dict[str, int]
    found: consumer.Found


def _resolve(conn: Connection, requests: list[ConsumerAllocations]) -> _Resolved:
    """Step 1 (unknown classes are raised for after the consumers, in
    upstream's order); 400 for a missing provider."""
    given = [u for r in requests for u in r.allocations]
    read = allocation_read.first_read(
        conn,
        {
            "uuids": sorted({_provider_key(u) for u in given}),
            "names": sorted(
                {
                    name
                    for r in requests
                    for resources in r.allocations.values()
                    for name in resources
                }
            ),
            "projects": sorted({r.project_id for r in requests}),
            "users": sorted({r.user_id for r in requests}),
            "types": sorted({r.consumer_type for r in requests if r.consumer_type is not None}),
            "consumers": sorted({r.consumer_uuid for r in requests}),
        },
    )
    result = {}
    for value in given:
        hit = read.providers.get(_provider_key(value))
        if hit is None:
            raise errors.ProviderNotFoundForWrite(
                "Allocation for resource provider '%s' that does not exist." % value
            )
        result[value] = hit
    return _Resolved(result, read.classes, read.found)


#: An existing consumer to take (bump) and the owner it gets: project,
#: user and type ids.
_Taking = tuple[consumer.Consumer, Owner]
#: A consumer to create: its uuid and owner.
_Creating = tuple[str, Owner]


def _ensure_consumer(
    conn: Connection,
    req: ConsumerAllocations,
    found: consumer.Lookup,
    creating: list[_Creating],
    taking: list[_Taking],
) -> tuple[_Owners, bool] | None:
    """Check the generation and queue the consumer in ``creating`` or in
    ``taking`` (to be taken for writing); the owner it had before (None:
    created here) and the one it has after, and whether allocations no
    consumer row carried hold its uuid (only for one created here).

    Returns None for a consumer that does not exist and gets nothing
    (there is nothing to write or remove for it).
    """
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
        creating.append((req.consumer_uuid, (project, user, type_id)))
        return (None, (project, user, type_id)), found.holds
    if req.check_generation and current.generation != req.generation:
        raise consumer.generation_conflict(current.generation, req.generation)
    if type_id is None:
        type_id = current.consumer_type_id
    after: Owner = (project, user, type_id)
    taking.append((current, after))
    return (usage.owner_of(current), after), False


def _take_consumers(
    conn: Connection, requests: list[ConsumerAllocations], found: consumer.Found
) -> tuple[dict[str, _Owners], list[str]]:
    """Step 2, in consumer uuid order: the consumers this transaction
    holds (created here in one statement, then the existing ones
    row-locked in one more), each with its owner before and after, and
    those created here that allocations carried already.

    One that did not exist and gets nothing is left out: removing
    allocations a concurrent request gave it meanwhile would undo a
    write that committed after this one read the consumer missing.
    """
    owners: dict[str, _Owners] = {}
    legacy: list[str] = []
    creating: list[_Creating] = []
    taking: list[_Taking] = []
    for req in sorted(requests, key=lambda r: r.consumer_uuid):
        taken = _ensure_consumer(
            conn,
            req,
            found.lookup(req.consumer_uuid, req.project_id, req.user_id, req.consumer_type),
            creating,
            taking,
        )
        if taken is not None:
            owners[req.consumer_uuid] = taken[0]
            if taken[1]:
                legacy.append(req.consumer_uuid)
    consumer.create_all(conn, creating)
    consumer.bump_generations(conn, [current for current, _ in taking])
    for current, after in taking:
        consumer.update_owner(conn, current, *after)
    return owners, legacy


def _holding(
    found: consumer.Found,
    uuid: str,
    owner: tuple[str | None, str | None, str | None],
    generation: int | None,
) -> change.Holding | None:
    """What consumer ``uuid`` held when ``found`` was read (None:
    nothing), shown with ``owner`` (project, user, type name) and
    ``generation``."""
    rows = found.held.get(uuid)
    if not rows:
        return None
    held = change.Holding({}, {}, *owner, generation, {})
    for row in rows:
        held.add(*row)
    return held


def _held(
    conn: Connection,
    requests: list[ConsumerAllocations],
    found: consumer.Found,
    owners: dict[str, _Owners],
    legacy: list[str],
) -> _Held:
    """What the taken consumers hold now: as the first read found it for
    those that existed (their generation is the one read, so nothing
    changed it), read again for ``legacy``. The owner shown is the one
    it had before the write (the change feed's "old" value) and the
    generation the one read."""
    held = change.holdings(conn, legacy)
    for req in requests:
        taken = found.consumers.get(req.consumer_uuid)
        if taken is None or req.consumer_uuid not in owners:
            continue
        entry = _holding(
            found, req.consumer_uuid, found.owners[req.consumer_uuid], taken.generation
        )
        if entry is not None:
            held[req.consumer_uuid] = entry
    return held


#: What consumers hold now, by consumer uuid (one read: the providers to
#: lock and note, the amounts the usage deltas subtract, and the change
#: feed's old value).
_Held = dict[str, change.Holding]


def _providers_of(held: _Held, uuids: Iterable[str]) -> set[int]:
    return {pid for u in uuids if u in held for pid in held[u].provider_ids}


def _lock(conn: Connection, claims: list[Claim], held: _Held, emptied: list[str]) -> None:
    """Step 4: lock the providers whose generation moves (those claimed
    on, and those of the ``emptied`` consumers)."""
    claim.lock_providers(conn, {c.provider_id for c in claims} | _providers_of(held, emptied))


def _claims(
    requests: list[ConsumerAllocations], providers: dict[str, tuple[int, str]]
) -> list[Claim]:
    claims = []
    for req in requests:
        for given, resources in req.allocations.items():
            provider_id, provider_uuid = providers[given]
            claims += [
                Claim(provider_id, provider_uuid, name, amount, req.consumer_uuid)
                for name, amount in resources.items()
            ]
    return claims


def _note_usages(
    conn: Connection,
    owners: dict[str, _Owners],
    old: dict[str, dict[int, int]],
    claims: list[Claim],
) -> None:
    """Note how the owners' usages change: each consumer in ``owners``
    held ``old`` under its first owner and holds ``claims`` under its
    second."""
    new: dict[str, Counter[int]] = {u: Counter() for u in owners}
    for c in claims:
        new[c.consumer_uuid][c.class_id] += c.amount
    changes.note_usage(
        conn,
        usage.deltas(
            (before, old.get(u, {}), after, new[u]) for u, (before, after) in owners.items()
        ),
    )


def replace_allocations(conn: Connection, requests: list[ConsumerAllocations]) -> None:
    """Replace all allocations of each consumer in ``requests``.

    Runs in the caller's transaction; on any error the caller's rollback
    leaves everything as it was.

    Raises ProviderNotFoundForWrite (400), ConcurrentUpdate (409, consumer
    generation), UnknownResourceClass (400), CapacityExceeded (409, bare
    upstream reason; callers add their prefix) and ClaimedProviderDeleted
    (409, a claimed provider deleted since step 1; :func:`run_claim`
    runs the transaction again).
    """
    resolved = _resolve(conn, requests)
    owners, legacy = _take_consumers(conn, requests, resolved.found)
    claims = _claims(requests, resolved.providers)
    claim.resolve_classes(claims, resolved.classes)
    emptied = [r.consumer_uuid for r in requests if not r.allocations and r.consumer_uuid in owners]
    held = _held(conn, requests, resolved.found, owners, legacy)
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
    claim.insert(conn, claims)
    consumer.delete_if_unused(conn, emptied)
    _note_usages(conn, owners, old, claims)
    _record(conn, requests, owners, claims, before)


def _record(
    conn: Connection,
    requests: list[ConsumerAllocations],
    owners: dict[str, _Owners],
    claims: list[Claim],
    before: dict[str, change.Holding],
) -> None:
    """Record the change feed's event of each consumer written."""
    written = {
        r.consumer_uuid: change.Written(
            r.consumer_uuid, {}, {}, r.project_id, r.user_id, r.consumer_type, 1
        )
        for r in requests
        if r.consumer_uuid in owners
    }
    for c in claims:
        entry = written[c.consumer_uuid]
        entry.allocations.setdefault(c.provider_uuid, {})[c.class_name] = c.amount
        entry.provider_ids[c.provider_id] = c.provider_uuid
    for uuid, entry in sorted(written.items()):
        old = before.get(uuid)
        if owners[uuid][0] is not None and entry.allocations:
            if old is None:  # it held nothing: read what it is now
                old_row = consumer.get(conn, uuid)
                type_id = owners[uuid][1][2]
                entry.generation = old_row.generation if old_row else 1
                if entry.consumer_type is None and type_id is not None:
                    entry.consumer_type = consumer.names_of_types(conn, [type_id]).get(type_id)
            else:
                entry.generation = old.generation or 0
                if entry.consumer_type is None:
                    entry.consumer_type = old.consumer_type
        change.allocations_event(conn, entry, old)


def run_claim(db: Database, fn: Callable[[Connection], T], attempts: int) -> T:
    """Run the write ``fn`` in its own transaction, running it again
    whole (up to ``attempts`` times in all) when a provider it claims
    on was deleted under it (ClaimedProviderDeleted); after the last
    attempt, ClaimedProviderDeleted (409). Each attempt is one
    ``Database.run``, with its own retries of deadlocks."""
    for _ in range(max(attempts, 1)):
        try:
            return db.run(fn)
        except errors.ClaimedProviderDeleted:
            continue
    raise errors.ClaimedProviderDeleted(claim.PROVIDER_DELETED_MESSAGE)


def delete_for_consumer(conn: Connection, consumer_uuid: str) -> None:
    """Remove everything ``consumer_uuid`` holds, and the consumer.

    Takes the consumer's row lock first so that a concurrent write to
    the same consumer is ordered before or after this one: by deleting
    the row as one read found it with what it holds (the lock, and the
    proof that the holdings read are still what it holds), or, when
    that row changed or there is none (allocations without one), by
    locking it and reading again. Provider generations do not move (as
    upstream). NotFound (404) when the consumer holds nothing.
    """
    found = allocation_read.first_read(conn, {"consumers": [consumer_uuid]}).found
    owner = found.consumers.get(consumer_uuid)
    if owner is None and consumer_uuid not in found.held:
        raise _nothing_held(consumer_uuid)
    if owner is not None:
        held = _holding(found, consumer_uuid, found.owners[consumer_uuid], owner.generation)
        if held is not None and consumer.delete_unchanged(conn, owner):
            _remove(conn, consumer_uuid, owner, held)
            return
    owner = consumer.get(conn, consumer_uuid, lock=True)
    _remove(conn, consumer_uuid, owner, change.holdings(conn, [consumer_uuid]).get(consumer_uuid))
    conn.execute(_DELETE_CONSUMER, {"b_uuid": consumer_uuid})


def _nothing_held(consumer_uuid: str) -> errors.NotFound:
    return errors.NotFound("No allocations for consumer '%s'" % consumer_uuid)


def _remove(
    conn: Connection,
    consumer_uuid: str,
    owner: consumer.Consumer | None,
    held: change.Holding | None,
) -> None:
    """Delete the allocations ``held`` of a consumer locked (or deleted)
    here, noting and recording it; NotFound (404) when it holds none."""
    if held is None:
        raise _nothing_held(consumer_uuid)
    changes.note(conn, changes.USAGE, set(held.provider_ids))
    # Allocations without a consumer row count in no project; their
    # usage rows alone then make every project's kept answers go.
    if owner is not None:
        changes.note_usage(
            conn, usage.deltas([(usage.owner_of(owner), held.by_class, usage.owner_of(owner), {})])
        )
    change.removed_event(conn, consumer_uuid, held)
    conn.execute(_DELETE, {"uuids": [consumer_uuid]})
