"""Usages: sums of allocations per provider, project, user and type, and
how a write changes a project's usages.

Every aggregate is grouped by ids and turned into names in Python, so the
answers are the same on SQLite, PostgreSQL and MariaDB (upstream groups
by one column and selects another, which PostgreSQL refuses).

Every write of allocations notes by how much it changed each owner's
usages (:func:`deltas`, into ``berth.db.changes.note_usage``), so that an
answer kept per worker (``berth.domain.memo``) is brought up to date
(:func:`brought_up_to_date`) rather than computed again.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import AnySelect, changes
from berth.db import tables as t
from berth.domain import common
from berth.domain.consumer import UNKNOWN_TYPE, Consumer, Owner, names_of_types

#: The ``consumer_type`` filter value that means every type, summed.
ALL_TYPES = "all"

V = TypeVar("V")


_RP, _INV, _A = t.resource_providers, t.inventories, t.allocations
#: Built once (``GET /resource_providers/{uuid}/usages``): the provider's
#: generation and, per class it has inventory of, the class name and the
#: amount allocated, in one statement. The outer joins leave one row,
#: with no class, for a provider without inventory.
_PROVIDER_USAGES = (
    sa.select(
        _RP.c.generation,
        t.resource_classes.c.name,
        sa.select(sa.func.coalesce(common.sum_used(_A), 0))
        .where(
            _A.c.resource_provider_id == _INV.c.resource_provider_id,
            _A.c.resource_class_id == _INV.c.resource_class_id,
        )
        .scalar_subquery(),
    )
    .select_from(
        _RP.outerjoin(_INV, _INV.c.resource_provider_id == _RP.c.id).outerjoin(
            t.resource_classes, t.resource_classes.c.id == _INV.c.resource_class_id
        )
    )
    .where(_RP.c.uuid == sa.bindparam("b_uuid"))
)


def provider_usages(conn: Connection, uuid: str) -> tuple[int, dict[str, int]] | None:
    """The provider's generation and, for every class it has inventory
    of, the amount used (0 when nothing is allocated); None when there
    is no such provider."""
    rows = conn.execute(_PROVIDER_USAGES, {"b_uuid": uuid}).all()
    if not rows:
        return None
    return int(rows[0][0]), {name: int(used) for _, name, used in rows if name is not None}


def _owned(query: AnySelect, project_id: str, user_id: str | None) -> AnySelect:
    """Restrict ``query`` (over allocations) to one project (and user)."""
    a, c, p, u = t.allocations, t.consumers, t.projects, t.users
    query = (
        query.join(c, c.c.uuid == a.c.consumer_id)
        .join(p, p.c.id == c.c.project_id)
        .where(p.c.external_id == project_id)
    )
    if user_id:
        query = query.join(u, u.c.id == c.c.user_id).where(u.c.external_id == user_id)
    return query


def _owned_consumers(query: AnySelect, project_id: str, user_id: str | None) -> AnySelect:
    """Restrict ``query`` (over consumers) to the project's (and user's)
    consumers that hold any allocation: one index probe per consumer,
    where counting distinct consumers over the allocations reads them
    all (slower, the more allocations a consumer has)."""
    a, c, p, u = t.allocations, t.consumers, t.projects, t.users
    query = query.join(p, p.c.id == c.c.project_id).where(p.c.external_id == project_id)
    if user_id:
        query = query.join(u, u.c.id == c.c.user_id).where(u.c.external_id == user_id)
    return query.where(sa.exists().where(a.c.consumer_id == c.c.uuid))


def project_usages(conn: Connection, project_id: str, user_id: str | None = None) -> dict[str, int]:
    """Class name -> amount used by the project's (and user's) consumers."""
    a = t.allocations
    query = _owned(
        sa.select(a.c.resource_class_id, common.sum_used(a)).select_from(a), project_id, user_id
    )
    rows = conn.execute(query.group_by(a.c.resource_class_id))
    names = common.resource_class_names(conn)
    return _sorted({names[row.resource_class_id]: int(row.used) for row in rows})


def usages_by_type(
    conn: Connection, project_id: str, user_id: str | None, consumer_type: str | None
) -> dict[str, dict[str, int]]:
    """Per consumer type: class name -> amount, plus ``consumer_count``.

    ``consumer_type`` None groups by type (``unknown`` for untyped
    consumers); ``all`` sums every type under ``all``; ``unknown`` keeps
    untyped consumers only; any other name keeps that type only.
    """
    a, c, ct = t.allocations, t.consumers, t.consumer_types
    base = _owned(
        sa.select(c.c.consumer_type_id, a.c.resource_class_id, common.sum_used(a)).select_from(a),
        project_id,
        user_id,
    )
    counts = _owned_consumers(
        sa.select(c.c.consumer_type_id, sa.func.count().label("consumers")).select_from(c),
        project_id,
        user_id,
    )
    if consumer_type == UNKNOWN_TYPE:
        base = base.where(c.c.consumer_type_id.is_(None))
        counts = counts.where(c.c.consumer_type_id.is_(None))
    elif consumer_type not in (None, ALL_TYPES):
        wanted = sa.select(ct.c.id).where(ct.c.name == consumer_type)
        base = base.where(c.c.consumer_type_id.in_(wanted))
        counts = counts.where(c.c.consumer_type_id.in_(wanted))
    if consumer_type == ALL_TYPES:
        return _all_types(conn, base, counts)
    sums = conn.execute(base.group_by(c.c.consumer_type_id, a.c.resource_class_id)).all()
    per_type = {
        row.consumer_type_id: row.consumers
        for row in conn.execute(counts.group_by(c.c.consumer_type_id))
    }
    type_names = names_of_types(conn, per_type)
    class_names = common.resource_class_names(conn)
    result: dict[str, dict[str, int]] = defaultdict(dict)
    for row in sums:
        name = type_names.get(row.consumer_type_id, UNKNOWN_TYPE)
        result[name][class_names[row.resource_class_id]] = int(row.used)
        result[name]["consumer_count"] = int(per_type[row.consumer_type_id])
    return _sorted({name: _sorted(entry) for name, entry in result.items()})


def _all_types(conn: Connection, base: AnySelect, counts: AnySelect) -> dict[str, dict[str, int]]:
    """Every type summed together under ``all``."""
    a = t.allocations
    sums = conn.execute(
        base.with_only_columns(a.c.resource_class_id, common.sum_used(a)).group_by(
            a.c.resource_class_id
        )
    ).all()
    if not sums:
        return {}
    total = conn.execute(counts.with_only_columns(sa.func.count())).scalar_one()
    class_names = common.resource_class_names(conn)
    entry: dict[str, int] = {class_names[row.resource_class_id]: int(row.used) for row in sums}
    entry["consumer_count"] = int(total)
    return {ALL_TYPES: _sorted(entry)}


def _sorted(answer: dict[str, V]) -> dict[str, V]:
    """By name: the same bytes however the database ordered its groups,
    and whether computed or brought up to date."""
    return dict(sorted(answer.items()))


def owner_of(consumer: Consumer) -> Owner:
    """The owner ``consumer``'s allocations count for."""
    return consumer.project_id, consumer.user_id, consumer.consumer_type_id


def held_amounts(conn: Connection, consumer_uuids: list[str]) -> dict[str, dict[int, int]]:
    """Per consumer, class id -> amount it holds now (consumers holding
    nothing are left out)."""
    if not consumer_uuids:
        return {}
    a = t.allocations
    rows = conn.execute(
        sa.select(a.c.consumer_id, a.c.resource_class_id, common.sum_used(a))
        .where(a.c.consumer_id.in_(consumer_uuids))
        .group_by(a.c.consumer_id, a.c.resource_class_id)
    )
    held: dict[str, dict[int, int]] = {}
    for row in rows:
        held.setdefault(row.consumer_id, {})[row.resource_class_id] = int(row.used)
    return held


#: One consumer's change: the owner and amounts (class id -> amount) it
#: counted for before (None: nowhere), then the owner and amounts after.
Move = tuple["Owner | None", dict[int, int], Owner, dict[int, int]]


def deltas(moves: Iterable[Move]) -> Counter[changes.UsageKey]:
    """How project usages change when each consumer moves as ``moves``
    say: amounts of each class, and (no class) the number of consumers
    holding anything."""
    found: Counter[changes.UsageKey] = Counter()
    for before, old, after, new in moves:
        if before is not None:
            for rc, amount in old.items():
                found[(*before, rc)] -= amount
            if old:
                found[(*before, None)] -= 1
        for rc, amount in new.items():
            found[(*after, rc)] += amount
        if new:
            found[(*after, None)] += 1
    # Amounts that cancel out stay, at 0: the project is still named.
    return found


#: What ``GET /usages`` is asked: (project, by consumer type (1.38),
#: user or None, consumer_type or None), all as the query gave them.
Key = tuple[str, bool, "str | None", "str | None"]


def brought_up_to_date(
    conn: Connection, key: Key, answer: dict[str, Any], deltas: Mapping[changes.UsageKey, int]
) -> dict[str, Any] | None:
    """The answer to ``key`` (:func:`project_usages`, or with types
    :func:`usages_by_type`) after the project's usages changed by
    ``deltas`` (``berth.db.changes``: project, user, type, class or None
    for the consumer count -> amount); None when it must be computed
    again (amounts that do not add up)."""
    _project, by_type, user, consumer_type = key
    if user:
        u = t.users
        user_row = conn.scalar(sa.select(u.c.id).where(u.c.external_id == user))
        deltas = {k: n for k, n in deltas.items() if k[1] == user_row}
    if not any(deltas.values()):
        return answer
    class_names, type_names = _names(
        conn,
        {k[3] for k in deltas if k[3] is not None},
        {k[2] for k in deltas if k[2] is not None} if by_type else set(),
    )
    if not class_names.keys() >= {k[3] for k in deltas if k[3] is not None}:
        return None  # a class gone meanwhile: compute it again
    if not by_type:
        sums: Counter[str] = Counter(answer)
        for (_p, _u, _type, rc), amount in deltas.items():
            if rc is not None:
                sums[class_names[rc]] += amount
        return _checked(sums, counted=False)
    entries: dict[str, Counter[str]] = {name: Counter(entry) for name, entry in answer.items()}
    for (_p, _u, type_id, rc), amount in deltas.items():
        label = UNKNOWN_TYPE if type_id is None else type_names.get(type_id, UNKNOWN_TYPE)
        if consumer_type == UNKNOWN_TYPE and type_id is not None:
            continue
        if consumer_type not in (None, ALL_TYPES, UNKNOWN_TYPE) and (
            type_id is None or label != consumer_type
        ):
            continue
        entry = entries.setdefault(ALL_TYPES if consumer_type == ALL_TYPES else label, Counter())
        entry["consumer_count" if rc is None else class_names[rc]] += amount
    result: dict[str, Any] = {}
    for name, entry in entries.items():
        checked = _checked(entry, counted=True)
        if checked is None:
            return None
        if checked:
            result[name] = checked
    return _sorted(result)


def _names(
    conn: Connection, class_ids: set[int], type_ids: set[int]
) -> tuple[dict[int, str], dict[int, str]]:
    """Names of resource classes and consumer types by id, in one
    statement as the driver takes it (every first ``GET /usages`` after a
    write runs it, and building it through SQLAlchemy cost as much as
    running it)."""
    mark = changes.placeholder(conn)
    parts, params = [], []
    for kind, table, ids in (
        ("c", t.resource_classes, class_ids),
        ("t", t.consumer_types, type_ids),
    ):
        if ids:
            parts.append(
                "SELECT '%s', id, name FROM %s WHERE id IN (%s)"
                % (kind, table.name, ", ".join([mark] * len(ids)))
            )
            params += sorted(ids)
    found: dict[str, dict[int, str]] = {"c": {}, "t": {}}
    if parts:
        for kind, id_, name in conn.exec_driver_sql(" UNION ALL ".join(parts), tuple(params)):
            found[kind][int(id_)] = name
    return found["c"], found["t"]


def _checked(sums: Counter[str], counted: bool) -> dict[str, int] | None:
    """The non-zero amounts, by name; {} for an entry nobody holds
    anything in; None when they cannot be right (a negative amount, or
    consumers counted without amounts or the other way round)."""
    if any(n < 0 for n in sums.values()):
        return None
    kept = {k: n for k, n in sums.items() if n}
    if counted:
        count = kept.pop("consumer_count", 0)
        if bool(count) != bool(kept):
            return None
        if count:
            kept["consumer_count"] = count
    return _sorted(kept)
