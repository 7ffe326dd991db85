"""Allocations: claiming, replacing and releasing resources.

The write path (``replace_allocations``) runs inside the caller's one
transaction, in this order, which is also the lock order (consumer rows,
then provider rows by id) so that concurrent claims do not deadlock:

1. resolve providers (400 for an unknown one);
2. check and compare-and-swap each consumer's generation (409), creating
   new consumers and updating their project/user/type;
3. resolve resource classes (400 for an unknown one);
4. lock every provider whose allocations grow, or that loses a consumer
   being emptied (``SELECT ... FOR UPDATE``, then the generation CAS of
   ``common.bump_provider_generation``) -- before reading any usage;
5. delete the consumers' current allocations, check capacity against
   what is left, insert the new ones;
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
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import changes
from berth.db import tables as t
from berth.db.engine import Database
from berth.domain import capacity, common, consumer, errors
from berth.domain.consumer import Consumer

T = TypeVar("T")

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


@dataclass(slots=True)
class _Claim:
    provider_id: int
    provider_uuid: str
    class_name: str
    amount: int
    consumer_uuid: str
    class_id: int = 0


def _provider_key(value: str) -> str:
    return common.normalize_uuid(value) or value


def _resolve_providers(conn: Connection, requests: list[ConsumerAllocations]
                       ) -> dict[str, tuple[int, str]]:
    """Provider uuid as given -> (id, stored uuid); 400 for a missing one."""
    given = [u for r in requests for u in r.allocations]
    keys = sorted({_provider_key(u) for u in given})
    rp = t.resource_providers
    found: dict[str, tuple[int, str]] = {}
    if keys:
        rows = conn.execute(sa.select(rp.c.id, rp.c.uuid)
                            .where(rp.c.uuid.in_(keys)))
        found = {row.uuid: (row.id, row.uuid) for row in rows}
    result = {}
    for value in given:
        hit = found.get(_provider_key(value))
        if hit is None:
            raise errors.ProviderNotFoundForWrite(
                "Allocation for resource provider '%s' that does not exist."
                % value)
        result[value] = hit
    return result


def _ensure_consumer(conn: Connection, req: ConsumerAllocations
                     ) -> tuple[Consumer, Owner | None] | None:
    """Check the generation and take the consumer for writing; with the
    owner it had before (None: created here).

    Returns None for a consumer that does not exist and gets nothing
    (there is nothing to write or remove for it).
    """
    project = consumer.project_id(conn, req.project_id)
    user = consumer.user_id(conn, req.user_id)
    type_id = (consumer.consumer_type_id(conn, req.consumer_type)
               if req.consumer_type is not None else None)
    current = consumer.get(conn, req.consumer_uuid)
    if current is None:
        if req.check_generation and req.generation is not None:
            raise consumer.generation_conflict(None, req.generation)
        if not req.allocations:
            return None
        return consumer.create(conn, req.consumer_uuid, project, user,
                                type_id, generation=1), None
    if req.check_generation and current.generation != req.generation:
        raise consumer.generation_conflict(current.generation,
                                            req.generation)
    consumer.bump_generation(conn, current)
    before = _owner(current)
    if type_id is None:
        type_id = current.consumer_type_id
    consumer.update_owner(conn, current, project, user, type_id)
    return current, before


#: Whose usages a consumer's allocations count in: (projects.id,
#: users.id, consumer_types.id or None).
Owner = tuple[int, int, "int | None"]


def _owner(consumer: Consumer) -> Owner:
    return consumer.project_id, consumer.user_id, consumer.consumer_type_id


def _held_amounts(conn: Connection, consumer_uuids: list[str]
                  ) -> dict[str, dict[int, int]]:
    """Per consumer, class id -> amount it holds now."""
    if not consumer_uuids:
        return {}
    a = t.allocations
    rows = conn.execute(
        sa.select(a.c.consumer_id, a.c.resource_class_id, common.sum_used(a))
        .where(a.c.consumer_id.in_(consumer_uuids))
        .group_by(a.c.consumer_id, a.c.resource_class_id))
    held: dict[str, dict[int, int]] = {}
    for row in rows:
        held.setdefault(row.consumer_id, {})[row.resource_class_id] = int(
            row.used)
    return held


def _usage_deltas(moves: Iterable[tuple[Owner | None, dict[int, int],
                                        Owner, dict[int, int]]]
                  ) -> Counter[changes.UsageKey]:
    """How project usages change when each consumer goes from holding
    the first amounts under the first owner (None: counted nowhere) to the
    second amounts under the second."""
    deltas: Counter[changes.UsageKey] = Counter()
    for before, old, after, new in moves:
        if before is not None:
            for rc, amount in old.items():
                deltas[(*before, rc)] -= amount
            if old:
                deltas[(*before, None)] -= 1
        for rc, amount in new.items():
            deltas[(*after, rc)] += amount
        if new:
            deltas[(*after, None)] += 1
    # Amounts that cancel out stay, at 0: the project is still named.
    return deltas


def _class_ids(conn: Connection, claims: list[_Claim]) -> None:
    names = {c.class_name for c in claims}
    ids = common.resource_class_ids(conn, names)
    for name in sorted(names):
        if name not in ids:
            raise errors.UnknownResourceClass(
                "No such resource class %s." % name)
    for claim in claims:
        claim.class_id = ids[claim.class_name]


def lock_providers(conn: Connection, provider_ids: set[int]) -> None:
    """Row-lock the providers in id order and bump their generations.

    The lock is taken before any usage is read, so capacity checks on one
    provider are serialized. A provider deleted meanwhile, or a generation
    that moved under the CAS, raises ProviderGenerationRace.
    """
    if not provider_ids:
        return
    rp = t.resource_providers
    rows = conn.execute(
        sa.select(rp.c.id, rp.c.generation)
        .where(rp.c.id.in_(sorted(provider_ids)))
        .order_by(rp.c.id).with_for_update()).all()
    if len(rows) != len(provider_ids):
        raise errors.ProviderGenerationRace(PROVIDER_RACE_MESSAGE)
    for provider_id, generation in rows:
        try:
            common.bump_provider_generation(conn, provider_id, generation,
                                            changes.USAGE)
        except errors.ConcurrentUpdate:
            raise errors.ProviderGenerationRace(
                PROVIDER_RACE_MESSAGE) from None


def _held_provider_ids(conn: Connection, consumer_uuids: list[str]) -> set[int]:
    if not consumer_uuids:
        return set()
    a = t.allocations
    rows = conn.execute(sa.select(a.c.resource_provider_id).distinct()
                        .where(a.c.consumer_id.in_(sorted(consumer_uuids))))
    return {row[0] for row in rows}


def _inventories(conn: Connection, provider_ids: set[int], class_ids: set[int]
                 ) -> dict[tuple[int, int], capacity.Inventory]:
    inv = t.inventories
    rows = conn.execute(sa.select(
        inv.c.resource_provider_id, inv.c.resource_class_id, inv.c.total,
        inv.c.reserved, inv.c.min_unit, inv.c.max_unit, inv.c.step_size,
        inv.c.allocation_ratio).where(
            inv.c.resource_provider_id.in_(sorted(provider_ids)),
            inv.c.resource_class_id.in_(sorted(class_ids))))
    return {(r[0], r[1]): capacity.Inventory(*r[2:]) for r in rows}


def _usages(conn: Connection, provider_ids: set[int], class_ids: set[int]
            ) -> dict[tuple[int, int], int]:
    a = t.allocations
    rows = conn.execute(
        sa.select(a.c.resource_provider_id, a.c.resource_class_id,
                  common.sum_used(a))
        .where(a.c.resource_provider_id.in_(sorted(provider_ids)),
               a.c.resource_class_id.in_(sorted(class_ids)))
        .group_by(a.c.resource_provider_id, a.c.resource_class_id))
    return {(row.resource_provider_id, row.resource_class_id):
            int(row.used or 0) for row in rows}


def _invalid(class_name: str, provider: str) -> errors.CapacityExceeded:
    return errors.CapacityExceeded(
        "Inventory for '%s' on resource provider '%s' invalid."
        % (class_name, provider))


def _unable(class_name: str, provider: str, why: str) -> errors.CapacityExceeded:
    return errors.CapacityExceeded(
        "Unable to create allocation for '%s' on resource provider '%s'. "
        "The requested amount would %s." % (class_name, provider, why))


def _check_claims(conn: Connection, claims: list[_Claim]) -> None:
    """Upstream's capacity rules, in upstream's order, for the new claims
    (the consumers' old allocations are already gone)."""
    provider_ids = {c.provider_id for c in claims}
    class_ids = {c.class_id for c in claims}
    inventory = _inventories(conn, provider_ids, class_ids)
    used = _usages(conn, provider_ids, class_ids)
    with_inventory = {rp for rp, _ in inventory}
    missing = sorted({c.provider_uuid for c in claims
                      if c.provider_id not in with_inventory})
    if missing:
        names = sorted({(c.class_id, c.class_name) for c in claims})
        raise _invalid(", ".join(n for _, n in names), ", ".join(missing))
    _verify(claims, inventory, used)


def _verify(claims: list[_Claim],
            inventory: dict[tuple[int, int], capacity.Inventory],
            used: dict[tuple[int, int], int]) -> None:
    """Each claim against its inventory: present, within the units, and
    (with the claims before it and ``used``) within capacity."""
    wanted: dict[tuple[int, int], int] = defaultdict(int)
    for claim in claims:
        key = (claim.provider_id, claim.class_id)
        wanted[key] += claim.amount
        inv = inventory.get(key)
        if inv is None:
            raise _invalid(claim.class_name, claim.provider_uuid)
        if capacity.unit_problem(inv, claim.amount) is not None:
            raise _unable(claim.class_name, claim.provider_uuid,
                          "violate inventory constraints")
        if used.get(key, 0) + wanted[key] > inv.capacity:
            raise _unable(claim.class_name, claim.provider_uuid,
                          "exceed the capacity")


def _claims(requests: list[ConsumerAllocations],
            providers: dict[str, tuple[int, str]]) -> list[_Claim]:
    return [_Claim(providers[rp_uuid][0], providers[rp_uuid][1], name,
                   amount, req.consumer_uuid)
            for req in requests
            for rp_uuid, resources in req.allocations.items()
            for name, amount in resources.items()]


def _insert(conn: Connection, claims: list[_Claim]) -> None:
    if not claims:
        return
    stamp = common.now()
    conn.execute(t.allocations.insert(), [
        {"resource_provider_id": c.provider_id, "consumer_id": c.consumer_uuid,
         "resource_class_id": c.class_id, "used": c.amount,
         "created_at": stamp} for c in claims])


def replace_allocations(conn: Connection, requests: list[ConsumerAllocations],
                        *, check_capacity: bool = True) -> None:
    """Replace all allocations of each consumer in ``requests``.

    Runs in the caller's transaction; on any error the caller's rollback
    leaves everything as it was. With ``check_capacity=False`` (the
    reshaper, which checks the end state itself with
    :func:`check_capacity`) inventory rules are not applied.

    Raises ProviderNotFoundForWrite (400), ConcurrentUpdate (409, consumer
    generation), UnknownResourceClass (400), CapacityExceeded (409, bare
    upstream reason; callers add their prefix) and ProviderGenerationRace
    (409; retry the transaction, see :func:`run_claim`).
    """
    providers = _resolve_providers(conn, requests)
    ordered = sorted(requests, key=lambda r: r.consumer_uuid)
    # The consumers this transaction holds (row-locked, or created here).
    # One that did not exist and gets nothing is left alone: removing
    # allocations a concurrent request gave it meanwhile would undo a
    # write that committed after this one read the consumer missing.
    owners: dict[str, tuple[Owner | None, Owner]] = {}
    for req in ordered:
        got = _ensure_consumer(conn, req)
        if got is not None:
            owners[req.consumer_uuid] = (got[1], _owner(got[0]))
    taken = sorted(owners)
    claims = _claims(requests, providers)
    _class_ids(conn, claims)
    emptied = [r.consumer_uuid for r in requests
               if not r.allocations and r.consumer_uuid in owners]
    to_lock = {c.provider_id for c in claims}
    held = _held_provider_ids(conn, taken)
    if len(emptied) == len(taken):
        to_lock |= held
    elif emptied:
        to_lock |= _held_provider_ids(conn, emptied)
    lock_providers(conn, to_lock)
    # Providers the consumers leave see their usage drop too.
    changes.note(conn, changes.USAGE, held)
    # What the consumers held counted in their owners' usages (those
    # created here had none: allocations without a consumer count nowhere).
    old = _held_amounts(conn, [u for u in taken if owners[u][0] is not None]
                        ) if held else {}
    if held:  # else they hold nothing (a new consumer): nothing to delete
        a = t.allocations
        conn.execute(a.delete().where(a.c.consumer_id.in_(taken)))
    if check_capacity and claims:
        _check_claims(conn, claims)
    _insert(conn, claims)
    consumer.delete_if_unused(conn, emptied)
    new: dict[str, Counter[int]] = {u: Counter() for u in taken}
    for c in claims:
        new[c.consumer_uuid][c.class_id] += c.amount
    changes.note_usage(conn, _usage_deltas(
        (before, old.get(u, {}), after, new[u])
        for u, (before, after) in owners.items()))


def check_capacity(conn: Connection, provider_ids: set[int]) -> None:
    """Verify that what the providers hold now fits their inventories.

    For writers that change allocations with capacity checks off and
    want to verify the end state (the reshaper). Raises CapacityExceeded
    (bare upstream reason) for an allocation of a class the provider has
    no inventory of, one that breaks min_unit/max_unit/step_size, or a
    (provider, class) whose total exceeds its capacity.
    """
    if not provider_ids:
        return
    a, rp, rc = t.allocations, t.resource_providers, t.resource_classes
    rows = conn.execute(
        sa.select(a.c.resource_provider_id, rp.c.uuid, a.c.resource_class_id,
                  rc.c.name, a.c.used, a.c.consumer_id)
        .join(rp, rp.c.id == a.c.resource_provider_id)
        .join(rc, rc.c.id == a.c.resource_class_id)
        .where(a.c.resource_provider_id.in_(sorted(provider_ids)))
        .order_by(a.c.resource_provider_id, a.c.resource_class_id, a.c.id)
    ).all()
    claims = [_Claim(r[0], r[1], r[3], r[4], r[5], r[2]) for r in rows]
    if not claims:
        return
    inventory = _inventories(conn, provider_ids, {c.class_id for c in claims})
    # Every allocation is one of the claims here, so nothing else is used.
    _verify(claims, inventory, {})


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
    changes.note(conn, changes.USAGE,
                 _held_provider_ids(conn, [consumer_uuid]))
    # Allocations without a consumer row count in no project; their
    # usage rows alone then make every project's kept answers go.
    if owner is not None:
        old = _held_amounts(conn, [consumer_uuid]).get(consumer_uuid, {})
        changes.note_usage(conn, _usage_deltas(
            [(_owner(owner), old, _owner(owner), {})]))
    a, c = t.allocations, t.consumers
    result = conn.execute(a.delete().where(a.c.consumer_id == consumer_uuid))
    if result.rowcount == 0:
        raise errors.NotFound("No allocations for consumer '%s'"
                              % consumer_uuid)
    conn.execute(c.delete().where(c.c.uuid == consumer_uuid))


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
                       a.c.created_at, a.c.updated_at, p.c.external_id,
                       u.c.external_id, c.c.generation, ct.c.name)
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
            row[0], {"generation": row[1], "resources": {}})
        entry["resources"][row[2]] = row[3]
        view.last_modified = _later(view.last_modified, row[5] or row[4])
        view.project_id, view.user_id, view.generation = row[6], row[7], row[8]
        view.consumer_type = row[9] or consumer.UNKNOWN_TYPE
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
    for row in conn.execute(query):
        entry = result.setdefault(row[0], {"resources": {},
                                           "consumer_generation": row[3]})
        entry["resources"][row[1]] = row[2]
        newest = _later(newest, row[5] or row[4])
    return result, newest
