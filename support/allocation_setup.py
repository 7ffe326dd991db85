"""Set-up for the allocation, usage, claim-race and memo tests:
providers and inventories written by SQL (so these tests do not depend on
the provider and inventory endpoints) and the body of an allocation PUT."""

from __future__ import annotations

import uuid as uuidlib
from typing import Any

import sqlalchemy as sa

from berth.db import tables as t
from berth.db.engine import Database
from berth.domain import common

PROJECT = "6a0a4d9c-0e8c-4d35-a7b4-5d5f3a0e0a01"
USER = "0b7a2f4e-3f7e-4a61-9a55-d1d6b0b7a001"


def make_provider(db: Database, name: str, **inventories: Any) -> str:
    """A provider ``name`` with ``CLASS=total`` or ``CLASS=dict(...)``
    inventories; returns its uuid. Generation starts at 0."""
    uuid = str(uuidlib.uuid4())

    def work(conn: sa.Connection) -> None:
        rp = t.resource_providers
        new_id = conn.execute(
            rp.insert().values(uuid=uuid, name=name, generation=0, created_at=common.now())
        ).inserted_primary_key[0]
        conn.execute(rp.update().where(rp.c.id == new_id).values(root_provider_id=new_id))
        ids = common.resource_class_ids(conn, inventories)
        for cls, spec in inventories.items():
            fields = {"total": spec} if isinstance(spec, int) else dict(spec)
            row = {
                "reserved": 0,
                "min_unit": 1,
                "max_unit": fields["total"],
                "step_size": 1,
                "allocation_ratio": 1.0,
                **fields,
            }
            conn.execute(
                t.inventories.insert().values(
                    resource_provider_id=new_id,
                    resource_class_id=ids[cls],
                    created_at=common.now(),
                    **row,
                )
            )

    db.run(work)
    return uuid


def generation(db: Database, uuid: str) -> int:
    rp = t.resource_providers
    return int(
        db.read(
            lambda conn: conn.execute(
                sa.select(rp.c.generation).where(rp.c.uuid == uuid)
            ).scalar_one()
        )
    )


def body(
    allocs: dict[str, dict[str, int]],
    gen: Any = None,
    *,
    project: str = PROJECT,
    user: str = USER,
    ctype: str | None = None,
) -> dict[str, Any]:
    """A 1.28+ PUT body (or one consumer of a POST body)."""
    data: dict[str, Any] = {
        "allocations": {rp: {"resources": res} for rp, res in allocs.items()},
        "project_id": project,
        "user_id": user,
        "consumer_generation": gen,
    }
    if ctype is not None:
        data["consumer_type"] = ctype
    return data
