"""Resource providers: create, rename, re-parent, delete, list.

Tree rules (upstream's): a provider's root is itself or its parent's root;
a provider may not be its own parent nor sit under one of its own
descendants; a provider with children or allocations cannot be deleted.

Concurrency: every change to a tree's shape first row-locks the tree's
root (:func:`lock_tree`), so two re-parentings cannot together build a
loop and a child cannot appear under a provider being deleted or moved.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import AnyRow, AnySelect, changes, events
from berth.db import tables as t
from berth.domain import change, common, errors
from berth.domain.memo import Memo

RP = t.resource_providers
_PARENT = RP.alias("parent")
_ROOT = RP.alias("root")

#: Marker for "leave the parent as it is" in :func:`update_provider`.
KEEP = object()

#: Lock attempts before a tree that keeps moving is reported as a conflict.
_LOCK_ATTEMPTS = 5


# Built once: every provider write reads its row back.
_SELECT = sa.select(
    RP.c.id,
    RP.c.uuid,
    RP.c.name,
    RP.c.generation,
    RP.c.parent_provider_id,
    RP.c.root_provider_id,
    _PARENT.c.uuid.label("parent_provider_uuid"),
    _ROOT.c.uuid.label("root_provider_uuid"),
    RP.c.created_at,
    RP.c.updated_at,
).select_from(
    RP.outerjoin(_PARENT, RP.c.parent_provider_id == _PARENT.c.id).outerjoin(
        _ROOT, RP.c.root_provider_id == _ROOT.c.id
    )
)
_BY_UUID = _SELECT.where(RP.c.uuid == sa.bindparam("b_uuid"))


def _select() -> AnySelect:
    """Providers with their parent and root uuids."""
    return _SELECT


def get_provider(conn: Connection, uuid: str) -> AnyRow | None:
    """One provider (columns of :func:`_select`: id, uuid, name, generation,
    parent/root ids and uuids, timestamps), or None."""
    return conn.execute(_BY_UUID, {"b_uuid": uuid}).first()


def load_provider(conn: Connection, uuid: str, message: str | None = None) -> AnyRow:
    """Like :func:`get_provider`, but raises NotFound (upstream wording
    unless ``message`` is given)."""
    row = get_provider(conn, uuid)
    if row is None:
        raise (errors.NotFound(message) if message else common.no_provider(uuid))
    return row


def list_providers(
    conn: Connection,
    *,
    name: str | None = None,
    uuid: str | None = None,
    in_tree: str | None = None,
    ids: Iterable[int] | None = None,
) -> list[AnyRow]:
    """Providers matching every given filter, in creation (id) order.

    ``in_tree`` is the uuid of any provider of the wanted tree (an unknown
    uuid matches nothing); ``ids`` restricts to those provider ids.
    """
    query = _select()
    if name is not None:
        query = query.where(RP.c.name == name)
    if uuid is not None:
        query = query.where(RP.c.uuid == uuid)
    if in_tree is not None:
        anchor = RP.alias("anchor")
        query = query.where(
            RP.c.root_provider_id
            == (
                sa.select(anchor.c.root_provider_id)
                .where(anchor.c.uuid == in_tree)
                .scalar_subquery()
            )
        )
    if ids is not None:
        wanted = sorted(set(ids))
        if not wanted:
            return []
        query = query.where(RP.c.id.in_(wanted))
    return list(conn.execute(query.order_by(RP.c.id)))


@dataclass(slots=True)
class Kept:
    """A provider row kept in a :class:`~berth.domain.memo.Memo`, with what
    callers made of it (encoded bodies, by their own keys): both go when
    the provider changes."""

    row: AnyRow
    renderings: dict[Hashable, Any] = field(default_factory=dict)


def kept_providers(conn: Connection, memo: Memo, ids: Iterable[int]) -> list[Kept]:
    """The providers of ``ids`` that exist, in id order, with the columns
    of :func:`list_providers`: from ``memo`` (a ``by_provider`` memo),
    reading only those it does not hold yet."""
    kept = memo.values(conn)
    wanted = sorted(set(ids))
    missing = [i for i in wanted if i not in kept]
    if missing:
        found = {row.id: row for row in conn.execute(_select().where(RP.c.id.in_(missing)))}
        for i in missing:
            # None: no such provider (until a change names its id).
            row = found.get(i)
            kept[i] = None if row is None else Kept(row)
    return [k for k in map(kept.get, wanted) if k is not None]


def descendant_ids(conn: Connection, provider_id: int) -> set[int]:
    """Ids of the children, grandchildren, ... of ``provider_id``."""
    root = conn.scalar(sa.select(RP.c.root_provider_id).where(RP.c.id == provider_id))
    children: dict[int, list[int]] = {}
    for id_, parent in conn.execute(
        sa.select(RP.c.id, RP.c.parent_provider_id).where(RP.c.root_provider_id == root)
    ):
        if parent is not None:
            children.setdefault(int(parent), []).append(int(id_))
    found: set[int] = set()
    stack = list(children.get(provider_id, []))
    while stack:
        current = stack.pop()
        if current not in found:
            found.add(current)
            stack.extend(children.get(current, []))
    return found


# The tree writes' statements, built once.
_ROOT_OF = sa.select(RP.c.root_provider_id).where(RP.c.id == sa.bindparam("b_id"))
_LOCK_ROW = sa.select(RP.c.id).where(RP.c.id == sa.bindparam("b_id")).with_for_update()
#: Which of a new provider's name and uuid another provider has: one row
#: per provider that has either (at most two).
_TAKEN = (
    sa.select(RP.c.name, RP.c.uuid)
    .where(sa.or_(RP.c.name == sa.bindparam("b_name"), RP.c.uuid == sa.bindparam("b_uuid")))
    .limit(2)
)
#: Whether a provider has children, and allocations, in one read.
_CHILD_OR_USED = sa.select(
    sa.select(RP.c.id)
    .where(RP.c.parent_provider_id == sa.bindparam("b_id"))
    .limit(1)
    .scalar_subquery()
    .label("child"),
    sa.select(t.allocations.c.id)
    .where(t.allocations.c.resource_provider_id == sa.bindparam("b_id"))
    .limit(1)
    .scalar_subquery()
    .label("used"),
)
_INSERT = RP.insert()
_DELETE_LINKS = [
    table.delete().where(table.c.resource_provider_id == sa.bindparam("b_id"))
    for table in (t.inventories, t.resource_provider_traits, t.resource_provider_aggregates)
]
_UNLINK = (
    RP.update()
    .where(RP.c.id == sa.bindparam("b_id"))
    .values(root_provider_id=None, parent_provider_id=None)
)
_DELETE = RP.delete().where(RP.c.id == sa.bindparam("b_id"))


def lock_tree(conn: Connection, provider_id: int, root: int | None = None) -> int | None:
    """Row-lock the root of ``provider_id``'s tree; return the root id.

    None when the provider no longer exists. ``root`` is the root the
    caller read with the provider, if it did (the first read is then
    skipped). The root is read again after the lock because a concurrent
    move may have changed it meanwhile.
    """
    for _ in range(_LOCK_ATTEMPTS):
        if root is None:
            root = conn.scalar(_ROOT_OF, {"b_id": provider_id})
            if root is None:
                return None
        conn.execute(_LOCK_ROW, {"b_id": root})
        now = conn.scalar(_ROOT_OF, {"b_id": provider_id})
        if now == root:
            return int(root)
        if now is None:
            return None
        root = now
    raise errors.ConcurrentUpdate(
        "The provider tree changed while it was being updated; please try again."
    )


def _action_error(prefix: str, action: str, reason: str) -> errors.BadRequest:
    """Upstream's wording for a refused tree change."""
    return errors.BadRequest("%s: Object action %s failed because: %s" % (prefix, action, reason))


def _duplicate_columns(conn: Connection, name: str, uuid: str) -> list[str]:
    """Which of name and uuid another provider already has."""
    taken = set()
    for row in conn.execute(_TAKEN, {"b_name": name, "b_uuid": uuid}):
        if row.uuid == uuid:
            taken.add("uuid")
        # Not the uuid, so the name matched (in the database's collation).
        if row.uuid != uuid or row.name == name:
            taken.add("name")
    return [column for column in ("name", "uuid") if column in taken]


def _parent_for(conn: Connection, parent_uuid: str, prefix: str) -> tuple[int, int]:
    """(id, root id) of an existing parent, its tree locked."""
    parent = common.provider_by_uuid(conn, parent_uuid)
    root = lock_tree(conn, parent.id, parent.root_provider_id) if parent is not None else None
    if parent is None or root is None:
        raise _action_error(prefix, "create", "parent provider UUID does not exist.")
    return int(parent.id), root


def create_provider(
    conn: Connection, name: str, uuid: str, parent_uuid: str | None = None
) -> AnyRow:
    """Create a provider (``uuid`` already normalized) and return its row.

    Raises BadRequest for a bad parent, DuplicateName when the name or
    uuid is taken.
    """
    prefix = 'Unable to create resource provider "%s", %s' % (name, uuid)
    parent_id = root_id = None
    if parent_uuid is not None:
        if parent_uuid == uuid:
            raise _action_error(
                prefix,
                "create",
                "parent provider UUID cannot be same as "
                "UUID. Please set parent provider UUID to None if there is "
                "no parent.",
            )
        parent_id, root_id = _parent_for(conn, parent_uuid, prefix)
    values = {"name": name, "uuid": uuid}
    taken = _duplicate_columns(conn, name, uuid)
    if taken:
        raise _duplicate(taken, values)
    try:
        new_id = common.inserted_id(
            conn.execute(
                _INSERT,
                {
                    "uuid": uuid,
                    "name": name,
                    "generation": 0,
                    "parent_provider_id": parent_id,
                    "root_provider_id": root_id,
                    "created_at": common.now(),
                },
            )
        )
    except sa.exc.IntegrityError as exc:
        # Lost a race with a concurrent create: say which column if the
        # database's message tells.
        column = "uuid" if "uuid" in str(exc.orig).lower() else "name"
        raise _duplicate([column], values) from None
    if root_id is None:
        conn.execute(RP.update().where(RP.c.id == new_id).values(root_provider_id=new_id))
    changes.note(conn, changes.STRUCTURE, [new_id])
    row = load_provider(conn, uuid)
    change.provider_event(conn, events.PROVIDER_CREATED, uuid, row, None)
    return row


def _duplicate(columns: list[str], values: dict[str, str]) -> errors.DuplicateName:
    taken = ", ".join("%s: %s" % (c, values[c]) for c in columns)
    return errors.DuplicateName("Conflicting resource provider %s already exists." % taken)


def update_provider(
    conn: Connection,
    uuid: str,
    name: str,
    parent_uuid: object = KEEP,
    *,
    allow_reparenting: bool = False,
) -> AnyRow:
    """Rename a provider and optionally move it; return the new row.

    ``parent_uuid`` is KEEP, None (make it a root) or a uuid. Before 1.37
    (``allow_reparenting`` False) only a root may gain a parent. Raises
    NotFound, BadRequest for a refused move, DuplicateName for a taken
    name.
    """
    row = load_provider(conn, uuid)
    if parent_uuid is not KEEP:
        _move(conn, row, parent_uuid, allow_reparenting)  # type: ignore[arg-type]
    # A name another provider has fails the unique key (no read first).
    try:
        conn.execute(
            RP.update().where(RP.c.id == row.id).values(name=name, updated_at=common.now())
        )
    except sa.exc.IntegrityError:
        raise _conflicting_name(name) from None
    # The candidate engine holds no names, but listings keep rows.
    changes.note(conn, changes.STRUCTURE, [row.id])
    new = load_provider(conn, uuid)
    change.provider_event(conn, events.PROVIDER_UPDATED, uuid, new, row)
    return new


def _conflicting_name(name: str) -> errors.DuplicateName:
    return errors.DuplicateName("Conflicting resource provider %s already exists." % name)


def _move(conn: Connection, row: AnyRow, parent_uuid: str | None, allow_reparenting: bool) -> None:
    """Give ``row`` the parent ``parent_uuid`` (None: none), enforcing the
    tree rules, and re-root its whole subtree."""
    prefix = "Unable to save resource provider %s" % row.uuid
    if lock_tree(conn, row.id, row.root_provider_id) is None:
        raise common.no_provider(row.uuid)
    current = conn.scalar(sa.select(RP.c.parent_provider_id).where(RP.c.id == row.id))
    if parent_uuid is None:
        if current is None:
            return
        if not allow_reparenting:
            raise _action_error(
                prefix, "update", "un-parenting a provider is not currently allowed."
            )
        _reroot(conn, row.id, None, row.id)
        return
    parent_id, root_id = _parent_for(conn, parent_uuid, prefix)
    if parent_id == current:
        return
    if current is not None and not allow_reparenting:
        raise _action_error(prefix, "update", "re-parenting a provider is not currently allowed.")
    if parent_id == row.id or parent_id in descendant_ids(conn, row.id):
        raise _action_error(prefix, "update", "creating loop in the provider tree is not allowed.")
    _reroot(conn, row.id, parent_id, root_id)


def _reroot(conn: Connection, provider_id: int, parent_id: int | None, root_id: int) -> None:
    """Set the parent of ``provider_id`` and the root of its subtree."""
    subtree = sorted(descendant_ids(conn, provider_id) | {provider_id})
    conn.execute(RP.update().where(RP.c.id == provider_id).values(parent_provider_id=parent_id))
    conn.execute(
        RP.update()
        .where(RP.c.id.in_(subtree))
        .values(root_provider_id=root_id, updated_at=common.now())
    )
    changes.note(conn, changes.STRUCTURE, subtree)


def delete_provider(conn: Connection, uuid: str) -> None:
    """Delete a provider with its inventories, traits and aggregate links.

    Raises NotFound, CannotDeleteParent (it has children) or ProviderInUse
    (it has allocations).
    """
    missing = "No resource provider with uuid %s found for delete" % uuid
    row = get_provider(conn, uuid)
    root = lock_tree(conn, row.id, row.root_provider_id) if row is not None else None
    if row is None or root is None:
        raise errors.NotFound(missing)
    if root != row.id:
        # Allocation writers bump (so lock) this row; locking it too
        # means the allocation check below sees every committed claim.
        # (A root is locked already.)
        conn.execute(_LOCK_ROW, {"b_id": row.id})
    child, used = conn.execute(_CHILD_OR_USED, {"b_id": row.id}).one()
    if child is not None:
        raise errors.CannotDeleteParent(
            "Unable to delete parent resource provider %s: It has child resource providers." % uuid
        )
    if used is not None:
        raise errors.ProviderInUse(
            "Unable to delete resource provider %s: Resource provider has allocations." % uuid
        )
    for delete in _DELETE_LINKS:
        conn.execute(delete, {"b_id": row.id})
    if root == row.id:
        # A root references itself; clear that first so every backend
        # accepts the delete whatever order it checks foreign keys in.
        conn.execute(_UNLINK, {"b_id": row.id})
    conn.execute(_DELETE, {"b_id": row.id})
    changes.note(conn, changes.STRUCTURE, [row.id])
    change.provider_event(conn, events.PROVIDER_DELETED, uuid, None, row)
