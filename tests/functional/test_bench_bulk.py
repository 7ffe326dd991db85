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
from berth.db import setup
from berth.db.engine import Database, create_engine
from tests.conftest import Client, make_conf

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import bulk  # noqa: E402
import world as world_mod  # noqa: E402

HOSTS, ALLOCATIONS = 40, 60
QUERIES = [
    "resources=VCPU:1,MEMORY_MB:1024,DISK_GB:10",
    "resources=VCPU:1,MEMORY_MB:1024,DISK_GB:10&required=HW_CPU_X86_AVX2,!CUSTOM_FAST",
    "resources=VCPU:1,DISK_GB:500&member_of=" + world_mod.uid("share-1"),
    ("resources=DISK_GB:10&resources_CPU=VCPU:2,MEMORY_MB:2048&required_CPU=HW_NUMA_ROOT"
     "&resources_NIC=SRIOV_NET_VF:1&required_NIC=CUSTOM_PHYSNET_A"
     "&same_subtree=_CPU,_NIC&group_policy=isolate"),
]


def dump(client: Client, world: world_mod.World) -> dict[str, Any]:
    """Every answer a reader could get about ``world``."""
    out: dict[str, Any] = {}
    rps = client.get("/resource_providers").json()["resource_providers"]
    out["providers"] = sorted(rps, key=lambda p: p["uuid"])
    for p in out["providers"]:
        base = "/resource_providers/%s" % p["uuid"]
        for part in ("inventories", "traits", "aggregates", "usages",
                     "allocations"):
            out[base + "/" + part] = client.get(base + "/" + part).json()
    for a in world.allocations:
        path = "/allocations/%s" % a.consumer
        out[path] = client.get(path).json()
    for n in range(5):
        path = "/usages?project_id=%s" % world_mod.uid("project-%d" % n)
        out[path] = client.get(path).json()
    for q in QUERIES:
        out[q] = client.get("/allocation_candidates?" + q).json()
    for q in ("resources=VCPU:8", "required=CUSTOM_FAST",
              "member_of=" + world_mod.uid("agg-3")):
        out["rp?" + q] = client.get("/resource_providers?" + q).json()
    return out


@pytest.fixture(scope="module")
def reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("api-built") / "placement.sqlite"
    engine = create_engine("sqlite:///%s" % path)
    setup.prepare(engine)
    with Client(create_app(make_conf(), Database(engine))) as client:
        world = world_mod.build("http://placement.test", hosts=HOSTS,
                                allocations=ALLOCATIONS, threads=1,
                                transport=client._transport)
        answers = dump(client, world)
    engine.dispose()
    return answers


def test_bulk_world_answers_as_the_api_built_one(
        db: Database, reference: dict[str, Any]) -> None:
    world = world_mod.plan(HOSTS, allocations=ALLOCATIONS)
    counts = db.run(lambda conn: bulk.write(conn, world))
    assert counts["resource_providers"] == len(world.providers)
    with Client(create_app(make_conf(), db)) as client:
        got = dump(client, world)
        assert got.keys() == reference.keys()
        for key in reference:
            assert got[key] == reference[key], key
        # Ids continue past the bulk rows: the API can keep writing.
        r = client.post("/resource_providers", json={"name": "after-bulk"})
        assert r.status_code == 200, r.text
        rp = r.json()["uuid"]
        r = client.put("/resource_providers/%s/inventories" % rp, json={
            "resource_provider_generation": 0,
            "inventories": {"VCPU": {"total": 4}}})
        assert r.status_code == 200, r.text
        r = client.put("/allocations/%s" % world_mod.uid("after"), json={
            "allocations": {rp: {"resources": {"VCPU": 1}}},
            "project_id": world_mod.uid("new-project"),
            "user_id": world_mod.uid("new-user"), "consumer_generation": None,
            "consumer_type": "INSTANCE"})
        assert r.status_code == 204, r.text
        r = client.put("/resource_providers/%s/aggregates" % rp, json={
            "resource_provider_generation": 2,
            "aggregates": [world_mod.uid("brand-new-agg")]})
        assert r.status_code == 200, r.text


def test_bulk_refuses_a_database_that_has_providers(db: Database) -> None:
    world = world_mod.plan(4, allocations=2)
    db.run(lambda conn: bulk.write(conn, world))
    with pytest.raises(SystemExit, match="already holds providers"):
        db.run(lambda conn: bulk.write(conn, world))
