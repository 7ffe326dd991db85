"""Resource classes: the standard ones (seeded from os-resource-classes)
and custom ones (``CUSTOM_*``), which callers may create, rename and delete.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import os_resource_classes
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import AnyRow, changes, events
from berth.db import tables as t
from berth.domain import change, common, errors

CUSTOM_PREFIX = os_resource_classes.CUSTOM_NAMESPACE


@dataclass(frozen=True, slots=True)
class ResourceClass:
    """A class name and when it last changed.

    ``modified`` is None for standard classes: upstream treats them as
    having no timestamps, so their last-modified time is "now".
    """

    name: str
    modified: dt.datetime | None


def is_standard(name: str) -> bool:
    return not name.startswith(CUSTOM_PREFIX)


def _from_row(name: str, created: dt.datetime | None, updated: dt.datetime | None) -> ResourceClass:
    if is_standard(name):
        return ResourceClass(name, None)
    return ResourceClass(name, updated or created)


def list_classes(conn: Connection) -> list[ResourceClass]:
    """Every class, standard ones first, in creation order."""
    rc = t.resource_classes
    rows = conn.execute(sa.select(rc.c.name, rc.c.created_at, rc.c.updated_at).order_by(rc.c.id))
    return [_from_row(name, created, updated) for name, created, updated in rows]


def _find(conn: Connection, name: str) -> AnyRow | None:
    return common.row_by_name(conn, t.resource_classes, name)


def _require(conn: Connection, name: str) -> AnyRow:
    return common.require_by_name(
        conn, t.resource_classes, name, "No such resource class %s." % name
    )


def get_class(conn: Connection, name: str) -> ResourceClass:
    """The class called ``name``; NotFound when there is none."""
    row = _require(conn, name)
    return _from_row(row.name, row.created_at, row.updated_at)


def _insert(conn: Connection, name: str) -> bool:
    """Insert a custom class; False when it exists (even by a race)."""
    made = (
        _find(conn, name) is None
        and common.insert_unique(conn, t.resource_classes.c.name, name) is not None
    )
    if made:
        change.name_event(conn, events.RESOURCE_CLASS_CREATED, name)
    return made


def create_class(conn: Connection, name: str) -> None:
    """Create custom class ``name``; Conflict when it exists."""
    if not _insert(conn, name):
        raise errors.Conflict("Conflicting resource class already exists: %s" % name)


def ensure_class(conn: Connection, name: str) -> bool:
    """Create custom class ``name`` unless present; True when created."""
    return _insert(conn, name)


def rename_class(conn: Connection, name: str, new_name: str) -> None:
    """Rename a custom class (the microversion 1.2-1.6 PUT).

    NotFound (no such class), BadRequest (standard class), Conflict
    (``new_name`` is taken).
    """
    row = _require(conn, name)
    if is_standard(name):
        raise errors.BadRequest("Cannot update standard resource class %s" % name)
    taken = _find(conn, new_name)
    if taken is not None and taken.id != row.id:
        raise errors.Conflict("Resource class already exists: %s" % new_name)
    rc = t.resource_classes
    try:
        with conn.begin_nested():
            conn.execute(
                rc.update().where(rc.c.id == row.id).values(name=new_name, updated_at=common.now())
            )
    except sa.exc.IntegrityError:
        raise errors.Conflict("Resource class already exists: %s" % new_name) from None
    changes.note(conn, changes.STRUCTURE)
    if new_name != name:
        change.name_event(conn, events.RESOURCE_CLASS_UPDATED, new_name, old=name)


def delete_class(conn: Connection, name: str) -> None:
    """Delete a custom class.

    NotFound (no such class), BadRequest (standard class), Conflict (the
    class has inventory or allocations).
    """
    row = _require(conn, name)
    prefix = "Error in delete resource class: "
    if is_standard(name):
        raise errors.BadRequest(prefix + "Cannot delete standard resource class %s." % name)
    # Upstream only looks at inventories; allocations are checked too
    # because their foreign key would otherwise fail the delete.
    for table in (t.inventories, t.allocations):
        used = conn.execute(
            sa.select(table.c.id).where(table.c.resource_class_id == row.id).limit(1)
        ).first()
        if used is not None:
            raise errors.Conflict(
                prefix + "Cannot delete resource class %s. Class is in use in inventory." % name
            )
    rc = t.resource_classes
    try:
        # An inventory added concurrently makes the foreign key refuse.
        with conn.begin_nested():
            conn.execute(rc.delete().where(rc.c.id == row.id))
    except sa.exc.IntegrityError:
        raise errors.Conflict(
            prefix + "Cannot delete resource class %s. Class is in use in inventory." % name
        ) from None
    changes.note(conn, changes.STRUCTURE)
    change.name_event(conn, events.RESOURCE_CLASS_DELETED, name)
