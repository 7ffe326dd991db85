"""Allocation writes through the API and what they leave, for the
tests of the statements each write sends and of its consumer lock: ``put``
a consumer's allocations, ``check_usages`` against the sum of the rows,
``held`` rows of a consumer."""

from __future__ import annotations

import uuid as uuidlib
from typing import Any

import sqlalchemy as sa

from berth.db import tables as t
from berth.db.engine import Database
from support.allocation_setup import PROJECT, body
from support.app_client import Client


def new() -> str:
    return str(uuidlib.uuid4())


def put(
    client: Client, consumer_uuid: str, allocs: dict[str, dict[str, int]], gen: int | None = None
) -> None:
    resp = client.put("/allocations/" + consumer_uuid, json=body(allocs, gen, ctype="INSTANCE"))
    assert resp.status_code == 204, resp.text


def check_usages(client: Client, db: Database, *providers: str) -> None:
    """Every usage the API shows (per provider, and the project's, kept
    up to date by the writes' notes) is the sum of the allocations."""
    a, rp, rc = t.allocations, t.resource_providers, t.resource_classes

    def sums(conn: Any) -> list[Any]:
        return conn.execute(
            sa.select(rp.c.uuid, rc.c.name, sa.func.sum(a.c.used))
            .select_from(
                a.join(rp, rp.c.id == a.c.resource_provider_id).join(
                    rc, rc.c.id == a.c.resource_class_id
                )
            )
            .group_by(rp.c.uuid, rc.c.name)
        ).all()

    rows = db.read(sums)
    for uuid in providers:
        want = {name: int(used) for rp_uuid, name, used in rows if rp_uuid == uuid}
        got = client.get("/resource_providers/%s/usages" % uuid).json()
        assert {k: v for k, v in got["usages"].items() if v} == want
    total: dict[str, int] = {}
    for _, name, used in rows:
        total[name] = total.get(name, 0) + int(used)
    got = client.at("1.9").get("/usages", params={"project_id": PROJECT}).json()
    assert {k: v for k, v in got["usages"].items() if v} == total


def held(db: Database, consumer_uuid: str) -> tuple[int, bool]:
    """How many allocation rows carry ``consumer_uuid``, and whether its
    consumer row exists."""
    a, c = t.allocations, t.consumers

    def work(conn: Any) -> tuple[int, bool]:
        rows = conn.scalar(
            sa.select(sa.func.count()).select_from(a).where(a.c.consumer_id == consumer_uuid)
        )
        row = conn.scalar(sa.select(c.c.id).where(c.c.uuid == consumer_uuid))
        return int(rows), row is not None

    return db.read(work)
