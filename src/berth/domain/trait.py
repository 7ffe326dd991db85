"""Traits: standard ones (seeded from os-traits) and custom ones
(``CUSTOM_*``), and the set of traits each provider has."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import AnyRow, changes, events
from berth.db import tables as t
from berth.domain import change, common, errors

CUSTOM_PREFIX = "CUSTOM_"


@dataclass(frozen=True, slots=True)
class Trait:
    name: str
    modified: dt.datetime | None


def _traits(conn: Connection, where: Iterable[sa.ColumnElement[bool]] = ()) -> list[Trait]:
    tr = t.traits
    rows = conn.execute(sa.select(tr.c.name, tr.c.created_at, tr.c.updated_at).where(*where))
    return sorted(
        (Trait(name, updated or created) for name, created, updated in rows),
        key=lambda trait: trait.name,
    )


def list_traits(
    conn: Connection,
    *,
    names: list[str] | None = None,
    prefix: str | None = None,
    associated: bool | None = None,
) -> list[Trait]:
    """Traits sorted by name, filtered as GET /traits filters them.

    Names are matched in Python so that every database compares them
    byte for byte (a MySQL collation may ignore case; LIKE treats ``_``
    as a wildcard).
    """
    where = []
    if associated is not None:
        linked = sa.select(t.resource_provider_traits.c.trait_id)
        where.append(t.traits.c.id.in_(linked) if associated else t.traits.c.id.not_in(linked))
    found = _traits(conn, where)
    if names is not None:
        wanted = set(names)
        found = [tr for tr in found if tr.name in wanted]
    if prefix is not None:
        found = [tr for tr in found if tr.name.startswith(prefix)]
    return found


def _require(conn: Connection, name: str) -> AnyRow:
    return common.require_by_name(conn, t.traits, name, "No such trait(s): %s." % name)


def get_trait(conn: Connection, name: str) -> Trait:
    """The trait called ``name``; NotFound when there is none."""
    row = _require(conn, name)
    return Trait(row.name, row.updated_at or row.created_at)


def ensure_trait(conn: Connection, name: str) -> tuple[bool, Trait]:
    """Create custom trait ``name`` unless present.

    Returns whether it was created, and the trait.
    """
    row = common.row_by_name(conn, t.traits, name)
    if row is not None:
        return False, Trait(row.name, row.updated_at or row.created_at)
    stamp = common.now()
    if common.insert_unique(conn, t.traits.c.name, name, stamp) is None:
        return False, get_trait(conn, name)  # a concurrent request's
    change.name_event(conn, events.TRAIT_CREATED, name)
    return True, Trait(name, stamp)


def delete_trait(conn: Connection, name: str) -> None:
    """Delete a custom trait.

    NotFound (no such trait), BadRequest (standard trait), Conflict (a
    provider has it).
    """
    row = _require(conn, name)
    if not name.startswith(CUSTOM_PREFIX):
        raise errors.BadRequest("Cannot delete standard trait %s." % name)
    in_use = errors.Conflict("The trait %s is in use by a resource provider." % name)
    rpt = t.resource_provider_traits
    if conn.execute(sa.select(rpt.c.trait_id).where(rpt.c.trait_id == row.id).limit(1)).first():
        raise in_use
    try:
        with conn.begin_nested():
            conn.execute(t.traits.delete().where(t.traits.c.id == row.id))
    except sa.exc.IntegrityError:
        raise in_use from None
    changes.note(conn, changes.STRUCTURE)
    change.name_event(conn, events.TRAIT_DELETED, name)


def traits_of(conn: Connection, provider_id: int) -> list[Trait]:
    """The provider's traits, sorted by name."""
    rpt = t.resource_provider_traits
    return _traits(
        conn,
        [
            t.traits.c.id.in_(
                sa.select(rpt.c.trait_id).where(rpt.c.resource_provider_id == provider_id)
            )
        ],
    )


def provider_traits(conn: Connection, uuid: str) -> tuple[int, list[Trait]]:
    """The provider's generation and traits (NotFound for a bad uuid)."""
    provider = common.require_provider(conn, uuid)
    return provider.generation, traits_of(conn, provider.id)


# Built once: every trait write of a provider runs them. What it has,
# with the names, is also the change feed's old value.
_HAVE = (
    sa.select(t.resource_provider_traits.c.trait_id, t.traits.c.name)
    .join(t.traits, t.traits.c.id == t.resource_provider_traits.c.trait_id)
    .where(t.resource_provider_traits.c.resource_provider_id == sa.bindparam("b_rp"))
)
_LINK = t.resource_provider_traits.insert()
_DROP = t.resource_provider_traits.delete().where(
    t.resource_provider_traits.c.resource_provider_id == sa.bindparam("b_rp"),
    t.resource_provider_traits.c.trait_id.in_(sa.bindparam("b_ids", expanding=True)),
)


def set_traits(
    conn: Connection, provider_id: int, trait_ids: Iterable[int], old: dict[int, str] | None = None
) -> list[str]:
    """Make ``trait_ids`` the provider's traits; no generation handling.
    ``old`` is what it has (trait id -> name) when the caller has read
    it in this transaction, else it is read here.

    Returns the names of the traits it had, sorted."""
    wanted = set(trait_ids)
    if old is None:
        old = dict(conn.execute(_HAVE, {"b_rp": provider_id}).all())
    have = set(old)
    if have - wanted:
        conn.execute(_DROP, {"b_rp": provider_id, "b_ids": sorted(have - wanted)})
    if wanted - have:
        stamp = common.now()
        conn.execute(
            _LINK,
            [
                {"resource_provider_id": provider_id, "trait_id": tid, "created_at": stamp}
                for tid in sorted(wanted - have)
            ],
        )
    return sorted(old.values())


def set_provider_traits(
    conn: Connection, uuid: str, generation: int, names: list[str]
) -> tuple[int, list[Trait]]:
    """Replace the provider's traits; return the new generation and traits.

    As upstream, a PUT that changes nothing leaves the generation alone.
    NotFound (no provider), ConcurrentUpdate (stale generation),
    BadRequest (unknown traits).
    """
    provider, found, have = _provider_traits(conn, uuid, names)
    if provider.generation != generation:
        raise errors.ConcurrentUpdate(
            "Resource provider's generation already changed. Please update "
            "the generation and try again."
        )
    missing = sorted(set(names) - set(found))
    if missing:
        raise errors.BadRequest("No such trait %s" % ", ".join(missing))
    new = _replace(conn, provider, {n: id_ for n, (id_, _) in found.items()}, have)
    # The traits it has now are those named: no read after the write.
    return new, sorted((tr for _, tr in found.values()), key=lambda trait: trait.name)


_RP = t.resource_providers
_TR, _RPT = t.traits, t.resource_provider_traits


def _no(column: sa.Column[Any]) -> sa.Cast[Any]:
    return sa.cast(sa.null(), column.type)


# Built once: every trait write of a provider runs it. In one statement
# (where there were three): the provider with its root's uuid and each
# trait it has (``held`` 1: the change feed's old value; a provider with
# none is one row with no trait), and the traits named (``held`` 0,
# with what the answer's Last-Modified needs).
_PROVIDER_TRAITS = sa.union_all(
    sa.select(
        *common.PROVIDER_COLUMNS,
        _TR.c.name,
        _TR.c.id,
        _TR.c.created_at,
        _TR.c.updated_at,
        sa.literal_column("1").label("held"),
    )
    .select_from(
        common.PROVIDER_WITH_ROOT.outerjoin(
            _RPT, _RPT.c.resource_provider_id == _RP.c.id
        ).outerjoin(_TR, _TR.c.id == _RPT.c.trait_id)
    )
    .where(common.PROVIDER_BY_UUID),
    sa.select(
        _no(_RP.c.id),
        _no(_RP.c.uuid),
        _no(_RP.c.generation),
        _no(_RP.c.uuid),
        _TR.c.name,
        _TR.c.id,
        _TR.c.created_at,
        _TR.c.updated_at,
        sa.literal_column("0"),
    ).where(_TR.c.name.in_(sa.bindparam("b_names", expanding=True))),
)


def _provider_traits(
    conn: Connection, uuid: str, names: list[str]
) -> tuple[common.WrittenProvider, dict[str, tuple[int, Trait]], dict[int, str]]:
    """The provider ``uuid`` (NotFound when there is none); name ->
    (id, trait) of the traits named that exist; and what the provider
    has: trait id -> name."""
    provider = None
    found: dict[str, tuple[int, Trait]] = {}
    have: dict[int, str] = {}
    for rp_id, rp_uuid, generation, root, name, id_, created, updated, held in conn.execute(
        _PROVIDER_TRAITS, {"b_uuid": uuid, "b_names": sorted(set(names))}
    ):
        if not held:
            found[name] = (int(id_), Trait(name, updated or created))
            continue
        provider = common.WrittenProvider(rp_id, rp_uuid, generation, root)
        if id_ is not None:
            have[int(id_)] = name
    if provider is None:
        raise common.no_provider(uuid)
    return provider, found, have


def _replace(
    conn: Connection,
    provider: common.WrittenProvider,
    ids: dict[str, int],
    have: dict[int, str] | None = None,
) -> int:
    """Make ``ids`` (name -> id) the traits of ``provider`` (read with
    its root; ``have``, what it has, when already read); bump its
    generation and record the change feed's event if that changed them.
    Return the generation."""
    old = set_traits(conn, provider.id, ids.values(), have)
    new = sorted(ids)
    if old == new:
        return int(provider.generation)
    generation = common.bump_provider_generation(conn, provider.id, provider.generation)
    change.set_event(
        conn, change.TRAITS, provider, (int(provider.generation), old), (generation, new)
    )
    return generation


def delete_provider_traits(conn: Connection, uuid: str) -> int:
    """Remove all the provider's traits; return the new generation (the
    same one when it had none, as upstream)."""
    provider = common.require_provider(conn, uuid, root=True)
    return _replace(conn, provider, {})
