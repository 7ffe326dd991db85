"""The bench's bulk world builder writes exactly what the API would have.

The same small plan is built twice: through the HTTP API into a fresh
SQLite file, and by ``bench/bulk.py`` into the backend under test. Every
read endpoint must then answer the same, generations included, and the
bulk-built database must take further writes through the API (its id
sequences are past the rows it wrote).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from berth.api.app import create_app
from berth.db.engine import Database
from tests.conftest import Client, make_conf

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import bulk  # noqa: E402
import world as world_mod  # noqa: E402

from support.bench_answers import ALLOCATIONS, HOSTS, dump


def test_bulk_world_answers_as_the_api_built_one(
    db: Database, bulk_reference: dict[str, Any]
) -> None:
    world = world_mod.plan(HOSTS, allocations=ALLOCATIONS)
    counts = db.run(lambda conn: bulk.write(conn, world))
    assert counts["resource_providers"] == len(world.providers)
    with Client(create_app(make_conf(), db)) as client:
        got = dump(client, world)
        assert got.keys() == bulk_reference.keys()
        for key in bulk_reference:
            assert got[key] == bulk_reference[key], key
        # Ids continue past the bulk rows: the API can keep writing.
        r = client.post("/resource_providers", json={"name": "after-bulk"})
        assert r.status_code == 200, r.text
        rp = r.json()["uuid"]
        r = client.put(
            "/resource_providers/%s/inventories" % rp,
            json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}},
        )
        assert r.status_code == 200, r.text
        r = client.put(
            "/allocations/%s" % world_mod.uid("after"),
            json={
                "allocations": {rp: {"resources": {"VCPU": 1}}},
                "project_id": world_mod.uid("new-project"),
                "user_id": world_mod.uid("new-user"),
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            },
        )
        assert r.status_code == 204, r.text
        r = client.put(
            "/resource_providers/%s/aggregates" % rp,
            json={
                "resource_provider_generation": 2,
                "aggregates": [world_mod.uid("brand-new-agg")],
            },
        )
        assert r.status_code == 200, r.text


def test_bulk_refuses_a_database_that_has_providers(db: Database) -> None:
    world = world_mod.plan(4, allocations=2)
    db.run(lambda conn: bulk.write(conn, world))
    with pytest.raises(SystemExit, match="already holds providers"):
        db.run(lambda conn: bulk.write(conn, world))
