"""Online data migrations: ``placement-manage db online_data_migrations``.

Upstream runs two, and a database that came from an old upstream release
(or from ``berth db import``) may still need them:

- providers without a ``root_provider_id`` get one (a root is its own
  root; a child takes its parent's root once the parent has one);
- allocations whose consumer has no ``consumers`` row get one, owned by
  the ``[placement] incomplete_consumer_*`` placeholder project and user.

Each takes a connection and the most rows it may migrate, and returns
``(found, done)``: rows that needed the migration (up to the limit) and
rows it migrated. Both are idempotent.
"""

from __future__ import annotations

from collections.abc import Callable

import sqlalchemy as sa
from oslo_config import cfg
from sqlalchemy.engine import Connection

from berth.db import changes, events
from berth.db import tables as t
from berth.domain import consumer, usage

__all__ = ["MIGRATIONS", "set_root_provider_ids", "create_incomplete_consumers"]

Migration = Callable[[Connection, cfg.ConfigOpts, int], tuple[int, int]]


def set_root_provider_ids(conn: Connection, conf: cfg.ConfigOpts, count: int) -> tuple[int, int]:
    """Give up to ``count`` root-less providers their root."""
    rp = t.resource_providers
    parent = rp.alias("parent")
    rows = conn.execute(
        sa.select(rp.c.id, rp.c.parent_provider_id, parent.c.root_provider_id.label("parent_root"))
        .select_from(rp.outerjoin(parent, rp.c.parent_provider_id == parent.c.id))
        .where(rp.c.root_provider_id.is_(None))
        .order_by(rp.c.id)
        .limit(count)
    ).all()
    done: list[int] = []
    for row in rows:
        root = row.id if row.parent_provider_id is None else row.parent_root
        if root is None:
            continue  # its parent is fixed first; a later batch takes it
        conn.execute(rp.update().where(rp.c.id == row.id).values(root_provider_id=root))
        done.append(row.id)
    if done:
        changes.note(conn, changes.STRUCTURE, done)
        events.resync(conn)
    return len(rows), len(done)


def create_incomplete_consumers(
    conn: Connection, conf: cfg.ConfigOpts, count: int
) -> tuple[int, int]:
    """Give up to ``count`` consumers that only allocations name a
    ``consumers`` row owned by the placeholder project and user."""
    a, c = t.allocations, t.consumers
    missing = list(
        conn.scalars(
            sa.select(a.c.consumer_id)
            .distinct()
            .where(~sa.exists().where(c.c.uuid == a.c.consumer_id))
            .order_by(a.c.consumer_id)
            .limit(count)
        )
    )
    if not missing:
        return 0, 0
    project = consumer.project_id(conn, conf.placement.incomplete_consumer_project_id)
    user = consumer.user_id(conn, conf.placement.incomplete_consumer_user_id)
    for uuid in missing:
        consumer.create(conn, uuid, project, user, None)
    # Their allocations now count in the placeholder project's usages.
    owner = (project, user, None)
    held = usage.held_amounts(conn, missing)
    changes.note_usage(
        conn, usage.deltas((None, {}, owner, held.get(uuid, {})) for uuid in missing)
    )
    changes.note(
        conn,
        changes.USAGE,
        conn.scalars(
            sa.select(a.c.resource_provider_id).distinct().where(a.c.consumer_id.in_(missing))
        ),
    )
    events.resync(conn)
    return len(missing), len(missing)


#: In the order upstream runs them.
MIGRATIONS: list[tuple[str, Migration]] = [
    ("set_root_provider_ids", set_root_provider_ids),
    ("create_incomplete_consumers", create_incomplete_consumers),
]
