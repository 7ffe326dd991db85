"""Traits: standard ones (seeded from os-traits) and custom ones
(``CUSTOM_*``), and the set of traits each provider has."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import changes, events
from berth.db import tables as t
from berth.domain import change, common, errors

CUSTOM_PREFIX = "CUSTOM_"


@dataclass(frozen=True, slots=True)
class Trait:
    name: str
    modified: dt.datetime | None


def _traits(conn: Connection, where: Iterable[sa.ColumnElement[bool]] = ()
            ) -> list[Trait]:
    tr = t.traits
    rows = conn.execute(sa.select(tr.c.name, tr.c.created_at, tr.c.updated_at)
                        .where(*where))
    return sorted((Trait(name, updated or created)
                   for name, created, updated in rows),
                  key=lambda trait: trait.name)


def list_traits(conn: Connection, *, names: list[str] | None = None,
                prefix: str | None = None,
                associated: bool | None = None) -> list[Trait]:
    """Traits sorted by name, filtered as GET /traits filters them.

    Names are matched in Python so that every database compares them
    byte for byte (a MySQL collation may ignore case; LIKE treats ``_``
    as a wildcard).
    """
    where = []
    if associated is not None:
        linked = sa.select(t.resource_provider_traits.c.trait_id)
        where.append(t.traits.c.id.in_(linked) if associated
                     else t.traits.c.id.not_in(linked))
    found = _traits(conn, where)
    if names is not None:
        wanted = set(names)
        found = [tr for tr in found if tr.name in wanted]
    if prefix is not None:
        found = [tr for tr in found if tr.name.startswith(prefix)]
    return found


def _require(conn: Connection, name: str) -> sa.Row:  # type: ignore[type-arg]
    return common.require_by_name(conn, t.traits, name,
                                  "No such trait(s): %s." % name)


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
    in_use = errors.Conflict("The trait %s is in use by a resource provider."
                             % name)
    rpt = t.resource_provider_traits
    if conn.execute(sa.select(rpt.c.trait_id)
                    .where(rpt.c.trait_id == row.id).limit(1)).first():
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
    return _traits(conn, [t.traits.c.id.in_(
        sa.select(rpt.c.trait_id).where(rpt.c.resource_provider_id
                                        == provider_id))])


def provider_traits(conn: Connection, uuid: str) -> tuple[int, list[Trait]]:
    """The provider's generation and traits (NotFound for a bad uuid)."""
    provider = common.require_provider(conn, uuid)
    return provider.generation, traits_of(conn, provider.id)


# Built once: every trait write of a provider runs them. What it has,
# with the names, is also the change feed's old value.
_HAVE = (sa.select(t.resource_provider_traits.c.trait_id, t.traits.c.name)
         .join(t.traits,
               t.traits.c.id == t.resource_provider_traits.c.trait_id)
         .where(t.resource_provider_traits.c.resource_provider_id
                == sa.bindparam("b_rp")))
_DROP = t.resource_provider_traits.delete().where(
    t.resource_provider_traits.c.resource_provider_id == sa.bindparam("b_rp"),
    t.resource_provider_traits.c.trait_id.in_(
        sa.bindparam("b_ids", expanding=True)))


def set_traits(conn: Connection, provider_id: int,
               trait_ids: Iterable[int]) -> list[str]:
    """Make ``trait_ids`` the provider's traits; no generation handling.

    Returns the names of the traits it had, sorted."""
    rpt = t.resource_provider_traits
    wanted = set(trait_ids)
    old = dict(conn.execute(_HAVE, {"b_rp": provider_id}).all())
    have = set(old)
    if have - wanted:
        conn.execute(_DROP, {"b_rp": provider_id,
                             "b_ids": sorted(have - wanted)})
    if wanted - have:
        stamp = common.now()
        conn.execute(rpt.insert(), [
            {"resource_provider_id": provider_id, "trait_id": tid,
             "created_at": stamp} for tid in sorted(wanted - have)])
    return sorted(old.values())


def set_provider_traits(conn: Connection, uuid: str, generation: int,
                        names: list[str]) -> tuple[int, list[Trait]]:
    """Replace the provider's traits; return the new generation and traits.

    As upstream, a PUT that changes nothing leaves the generation alone.
    NotFound (no provider), ConcurrentUpdate (stale generation),
    BadRequest (unknown traits).
    """
    provider = common.require_provider(conn, uuid, root=True)
    if provider.generation != generation:
        raise errors.ConcurrentUpdate(
            "Resource provider's generation already changed. Please update "
            "the generation and try again.")
    ids = common.trait_ids(conn, names)
    missing = sorted(set(names) - set(ids))
    if missing:
        raise errors.BadRequest("No such trait %s" % ", ".join(missing))
    new = _replace(conn, provider, ids)
    return new, traits_of(conn, provider.id)


def _replace(conn: Connection, provider: sa.Row,  # type: ignore[type-arg]
             ids: dict[str, int]) -> int:
    """Make ``ids`` (name -> id) the traits of ``provider`` (read with
    its root); bump its generation and record the change feed's event if
    that changed them. Return the generation."""
    old = set_traits(conn, provider.id, ids.values())
    new = sorted(ids)
    if old == new:
        return int(provider.generation)
    generation = common.bump_provider_generation(conn, provider.id,
                                                 provider.generation)
    change.set_event(conn, change.TRAITS, provider,
                     (int(provider.generation), old), (generation, new))
    return generation


def delete_provider_traits(conn: Connection, uuid: str) -> int:
    """Remove all the provider's traits; return the new generation (the
    same one when it had none, as upstream)."""
    provider = common.require_provider(conn, uuid, root=True)
    return _replace(conn, provider, {})
