"""Rows written straight into the database, so the inventory, class and
trait tests do not depend on the provider and allocation endpoints."""

from __future__ import annotations

import uuid as uuidlib

import sqlalchemy as sa

from berth.db import tables as t
from berth.db.engine import Database


def make_provider(db: Database, name: str | None = None, generation: int = 0) -> tuple[int, str]:
    """Insert a root provider; return its id and uuid."""
    uuid = str(uuidlib.uuid4())

    def insert(conn: sa.Connection) -> int:
        rp = t.resource_providers
        new_id = conn.execute(
            rp.insert().values(uuid=uuid, name=name or "rp-" + uuid, generation=generation)
        ).inserted_primary_key[0]
        conn.execute(rp.update().where(rp.c.id == new_id).values(root_provider_id=new_id))
        return int(new_id)

    return db.run(insert), uuid


def allocate(
    db: Database, provider_id: int, rc: str, used: int, consumer: str | None = None
) -> None:
    """Insert one allocation row (no consumer bookkeeping needed here)."""

    def insert(conn: sa.Connection) -> None:
        rc_id = conn.execute(
            sa.select(t.resource_classes.c.id).where(t.resource_classes.c.name == rc)
        ).scalar_one()
        conn.execute(
            t.allocations.insert().values(
                resource_provider_id=provider_id,
                resource_class_id=rc_id,
                consumer_id=consumer or str(uuidlib.uuid4()),
                used=used,
            )
        )

    db.run(insert)


def generation(db: Database, provider_id: int) -> int:
    rp = t.resource_providers
    return int(
        db.read(
            lambda conn: conn.execute(
                sa.select(rp.c.generation).where(rp.c.id == provider_id)
            ).scalar_one()
        )
    )
