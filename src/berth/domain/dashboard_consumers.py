"""The dashboard's consumers page: allocations summed per class for one
page of consumers, projects, users or consumer types, read from the
database (plain data; the HTML is the API layer's business)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import AnyRow, AnySelect
from berth.db import tables as t
from berth.domain import common
from berth.domain.dashboard import PAGE, Page, page_of

#: Groupings of the consumers page.
CONSUMER_VIEWS = ("consumer", "project", "user", "type")


@dataclass
class Consumers:
    view: str
    classes: list[str]
    rows: list[dict[str, Any]]
    page: Page


def consumers(conn: Connection, view: str = "consumer", page: int = 1) -> Consumers:
    """Allocations summed per class for one page of consumers (by uuid),
    projects, users or consumer types (by name)."""
    key, joined = _grouping(view)
    counted: Sequence[AnyRow] | None = None
    if view == "consumer":
        keys, paged = _page_of_consumers(conn, key, joined, page)
        where: Any = key.in_(keys)
    else:
        counted, paged = _page_of_groups(conn, key, joined, page)
        keys = [row.group_key for row in counted]
        where = sa.true() if paged.pages == 1 else key.in_(keys)
    rows: dict[Any, dict[str, Any]] = {
        k: {"key": k, "used": {}, "consumers": 0, "providers": 0} for k in keys
    }
    classes: set[str] = set()
    if keys:
        class_names = common.resource_class_names(conn)
        a = t.allocations
        sums = conn.execute(
            sa.select(key.label("group_key"), a.c.resource_class_id, common.sum_used(a))
            .select_from(joined)
            .where(where)
            .group_by(key, a.c.resource_class_id)
        )
        for row in sums:
            name = class_names[row.resource_class_id]
            rows[row.group_key]["used"][name] = int(row.used)
            classes.add(name)
        if counted is None:
            counted = conn.execute(_counts(key, joined).where(where)).all()
        for row in counted:
            rows[row.group_key]["consumers"] = row.consumers
            rows[row.group_key]["providers"] = row.providers
        if view == "consumer":
            _describe_consumers(conn, rows)
    return Consumers(view=view, classes=sorted(classes), rows=[rows[k] for k in keys], page=paged)


def _grouping(view: str) -> tuple[Any, Any]:
    """What the consumers page groups allocations by in ``view``, and the
    join that reaches it."""
    a, c = t.allocations, t.consumers
    if view == "consumer":
        return a.c.consumer_id, a
    p, u, ct = t.projects, t.users, t.consumer_types
    column = {"project": p.c.external_id, "user": u.c.external_id, "type": ct.c.name}[view]
    table = {"project": p, "user": u, "type": ct}[view]
    fk = {"project": c.c.project_id, "user": c.c.user_id, "type": c.c.consumer_type_id}[view]
    joined = a.join(c, c.c.uuid == a.c.consumer_id).outerjoin(table, table.c.id == fk)
    # Consumers of no type are "unknown", as upstream's usages say.
    return (sa.func.coalesce(column, "unknown") if view == "type" else column), joined


def _counts(key: Any, joined: Any) -> AnySelect:
    """Consumers and providers per group (``group_key``)."""
    a = t.allocations
    return (
        sa.select(
            key.label("group_key"),
            sa.func.count(sa.distinct(a.c.consumer_id)).label("consumers"),
            sa.func.count(sa.distinct(a.c.resource_provider_id)).label("providers"),
        )
        .select_from(joined)
        .group_by(key)
    )


def _page_of_consumers(
    conn: Connection, key: Any, joined: Any, page: int
) -> tuple[list[Any], Page]:
    """The consumer uuids of one page, and the page: there may be very
    many, so the database pages them."""
    total = conn.execute(
        sa.select(sa.func.count(sa.distinct(key))).select_from(joined)
    ).scalar_one()
    paged = page_of(page, PAGE, total)
    keys = list(
        conn.scalars(
            sa.select(key)
            .select_from(joined)
            .group_by(key)
            .order_by(key)
            .limit(paged.size)
            .offset(paged.offset)
        )
    )
    return keys, paged


def _page_of_groups(
    conn: Connection, key: Any, joined: Any, page: int
) -> tuple[list[AnyRow], Page]:
    """The counts (:func:`_counts`) of one page of groups, and the page:
    there are few groups (projects, users, types), so one pass counts
    them all."""
    counted = sorted(conn.execute(_counts(key, joined)).all(), key=lambda row: row.group_key)
    paged = page_of(page, PAGE, len(counted))
    return counted[paged.offset : paged.offset + paged.size], paged


def _describe_consumers(conn: Connection, rows: dict[Any, dict[str, Any]]) -> None:
    """Project, user and type of each consumer row."""
    c, p, u, ct = t.consumers, t.projects, t.users, t.consumer_types
    query = (
        sa.select(
            c.c.uuid,
            p.c.external_id.label("project"),
            u.c.external_id.label("user"),
            ct.c.name.label("type"),
        )
        .select_from(
            c.outerjoin(p, p.c.id == c.c.project_id)
            .outerjoin(u, u.c.id == c.c.user_id)
            .outerjoin(ct, ct.c.id == c.c.consumer_type_id)
        )
        .where(c.c.uuid.in_(list(rows)))
    )
    for row in conn.execute(query):
        rows[row.uuid].update(project=row.project, user=row.user, type=row.type or "unknown")
