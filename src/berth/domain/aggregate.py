"""Aggregates: which providers belong to which aggregate uuids.

Aggregates have no life of their own in Placement: a uuid named in a
membership is recorded on first use and never validated against anything.
"""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Iterable

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import changes
from berth.db import tables as t
from berth.domain import change, common, errors

AGG = t.placement_aggregates
LINK = t.resource_provider_aggregates

#: Longest aggregate uuid the column stores (the dashed form).
_UUID_LEN = 36


def storable(uuids: Iterable[str]) -> list[str]:
    """The uuids as they are stored, duplicates dropped, order kept.

    Spellings longer than the dashed form (``urn:uuid:...``, braces)
    cannot be stored as given and are stored dashed; shorter ones are kept
    exactly as the caller wrote them, as upstream keeps them.
    """
    seen: dict[str, None] = {}
    for value in uuids:
        if len(value) > _UUID_LEN:
            value = str(uuidlib.UUID(value))
        seen.setdefault(value, None)
    return list(seen)


def provider_aggregates(conn: Connection, provider_id: int) -> list[str]:
    """The aggregate uuids of one provider, sorted."""
    return sorted(
        conn.scalars(
            sa.select(AGG.c.uuid)
            .join(LINK, LINK.c.aggregate_id == AGG.c.id)
            .where(LINK.c.resource_provider_id == provider_id)
        )
    )


# Built once: every aggregate write of a provider runs them. In one
# statement, the ids of the uuids named (``linked`` 0) and what the
# provider is in, with the uuids (1: the change feed's old value).
_NAMED = sa.select(AGG.c.uuid, AGG.c.id, sa.literal_column("0").label("linked")).where(
    AGG.c.uuid.in_(sa.bindparam("b_uuids", expanding=True))
)
_NAMED_AND_LINKED = sa.union_all(
    _NAMED,
    sa.select(AGG.c.uuid, AGG.c.id, sa.literal_column("1"))
    .join(LINK, AGG.c.id == LINK.c.aggregate_id)
    .where(LINK.c.resource_provider_id == sa.bindparam("b_rp")),
)
_LINK = LINK.insert()
_UNLINK = LINK.delete().where(
    LINK.c.resource_provider_id == sa.bindparam("b_rp"),
    LINK.c.aggregate_id.in_(sa.bindparam("b_ids", expanding=True)),
)


def ensure_aggregates(
    conn: Connection, uuids: Iterable[str], found: dict[str, int] | None = None
) -> dict[str, int]:
    """Map each (storable) aggregate uuid to its id, recording new ones
    (``found``: those of them the caller has read already, all that
    exist)."""
    wanted = sorted(set(uuids))
    if not wanted:
        return {}
    if found is None:
        found = {str(uuid): int(id_) for uuid, id_, _ in conn.execute(_NAMED, {"b_uuids": wanted})}
    for value in wanted:
        if value not in found:
            new = common.insert_unique(conn, AGG.c.uuid, value)
            if new is None:  # lost a race: the winner's
                new = conn.execute(sa.select(AGG.c.id).where(AGG.c.uuid == value)).scalar_one()
            found[value] = new
    return {k: int(v) for k, v in found.items()}


def set_aggregates(
    conn: Connection, provider_uuid: str, uuids: list[str], generation: int | None = None
) -> tuple[list[str], int]:
    """Replace a provider's aggregates; return (stored uuids, generation).

    With ``generation`` (microversion 1.19 on) the caller's view must be
    current and the provider generation is bumped; without it, the
    provider row is only locked, as before 1.19 nothing changed it.
    Raises NotFound or ConcurrentUpdate.
    """
    row = common.require_provider(conn, provider_uuid, root=True)
    return _set_aggregates(conn, row, uuids, generation)


def _set_aggregates(
    conn: Connection, row: common.WrittenProvider, uuids: list[str], generation: int | None
) -> tuple[list[str], int]:
    new_generation = int(row.generation)
    if generation is not None:
        if generation != row.generation:
            raise errors.ConcurrentUpdate(
                "Resource provider's generation already changed. Please "
                "update the generation and try again."
            )
        new_generation = common.bump_provider_generation(conn, row.id, generation)
    else:
        conn.execute(
            sa.select(t.resource_providers.c.id)
            .where(t.resource_providers.c.id == row.id)
            .with_for_update()
        )
    stored = storable(uuids)
    named: dict[str, int] = {}
    linked: dict[int, str] = {}
    for uuid, id_, is_linked in conn.execute(
        _NAMED_AND_LINKED, {"b_uuids": sorted(set(stored)), "b_rp": row.id}
    ):
        if is_linked:
            linked[int(id_)] = str(uuid)
        else:
            named[str(uuid)] = int(id_)
    ids = ensure_aggregates(conn, stored, named)
    current = set(linked)
    keep = set(ids.values())
    gone = sorted(current - keep)
    if gone:
        conn.execute(_UNLINK, {"b_rp": row.id, "b_ids": gone})
    added = sorted(keep - current)
    if added:
        stamp = common.now()
        conn.execute(
            _LINK,
            [
                {"resource_provider_id": row.id, "aggregate_id": agg_id, "created_at": stamp}
                for agg_id in added
            ],
        )
    changes.note(conn, changes.STRUCTURE, [row.id])
    # Uuids compare exactly (a binary collation on MySQL), so the stored
    # spellings are those the table holds.
    change.set_event(
        conn,
        change.AGGREGATES,
        row,
        (int(row.generation), sorted(linked.values())),
        (new_generation, sorted(stored)),
    )
    return stored, new_generation
