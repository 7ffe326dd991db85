"""Proof by porting: a driver written against Nova's surface runs
unchanged through ``berth.client.agent`` and ``berth migrate-inventory``.

Covers ``berth.client`` (ProviderTree, ReportClient), ``berth.client.agent``
and ``berth.cli.migrate_inventory``; the driver is ``support/nova_style_driver.py``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx

from berth.client import ReportClient
from berth.client.agent import ResourceUpdater
from berth.db.engine import Database
from berth.direct import PlacementDirect
from support.api_setup import PROJECT, USER, ok
from support.nova_style_driver import NovaStyleDriver
from tests.conftest import make_conf

REPO = Path(__file__).resolve().parents[2]
AGG = "7f1a0e9c-0000-4000-8000-000000000001"
NODE = {"vcpus": 8, "memory_mb": 4096, "disk_gb": 100}
FLAT = {"cn1": {**NODE, "numa": 0}}
NUMA = {"cn1": {**NODE, "numa": 2}}
CONSUMERS = {
    str(uuid.UUID(int=500 + i)): (vcpu, mem, disk)
    for i, (vcpu, mem, disk) in enumerate([(2, 1024, 10), (2, 1024, 20), (2, 512, 5)])
}


def _put(http: httpx.Client, path: str, body: dict[str, Any]) -> None:
    gen = ok(http.get("/resource_providers/" + path.split("/")[0]))
    ok(
        http.put(
            "/resource_providers/" + path,
            json={**body, "resource_provider_generation": gen["generation"]},
        )
    )


def old_world(http: httpx.Client) -> tuple[str, str]:
    """A sharing DISK_GB pool, cn1 reported flat by the driver and put in
    the pool's aggregate (as Nova's API would), and instances holding
    CPU and memory on cn1 and disk on the pool."""
    pool = ok(http.post("/resource_providers", json={"name": "pool"}))["uuid"]
    _put(http, pool + "/inventories", {"inventories": {"DISK_GB": {"total": 1000}}})
    _put(http, pool + "/traits", {"traits": ["MISC_SHARES_VIA_AGGREGATE"]})
    _put(http, pool + "/aggregates", {"aggregates": [AGG]})
    client = ReportClient(http)
    root = client.get_provider_tree_and_ensure_root("cn1").data("cn1").uuid
    _put(http, root + "/aggregates", {"aggregates": [AGG]})
    updater = ResourceUpdater(NovaStyleDriver(FLAT), client)
    [result] = updater.update_all(startup=True)
    assert result.status == "updated"
    inv = ok(http.get("/resource_providers/%s/inventories" % root))
    assert set(inv["inventories"]) == {"VCPU", "MEMORY_MB"}  # disk shared
    for consumer, (vcpu, mem, disk) in CONSUMERS.items():
        ok(
            http.put(
                "/allocations/" + consumer,
                json={
                    "allocations": {
                        root: {"resources": {"VCPU": vcpu, "MEMORY_MB": mem}},
                        pool: {"resources": {"DISK_GB": disk}},
                    },
                    "project_id": PROJECT,
                    "user_id": USER,
                    "consumer_generation": None,
                },
                headers={"openstack-api-version": "placement 1.28"},
            ),
            204,
        )
    return root, pool


def check_numa_world(http: httpx.Client, root: str, pool: str) -> None:
    rps = ok(http.get("/resource_providers?in_tree=" + root))["resource_providers"]
    cells = {r["uuid"]: r for r in rps if r["uuid"] != root}
    assert sorted(r["name"] for r in cells.values()) == ["cn1_NUMA0", "cn1_NUMA1"]
    assert ok(http.get("/resource_providers/%s/inventories" % root))["inventories"] == {}
    for cell in cells:
        inv = ok(http.get("/resource_providers/%s/inventories" % cell))
        assert inv["inventories"]["VCPU"]["total"] == 4
        assert ok(http.get("/resource_providers/%s/traits" % cell))["traits"] == ["HW_NUMA_ROOT"]
    for consumer, (vcpu, mem, disk) in CONSUMERS.items():
        got = ok(http.get("/allocations/" + consumer))["allocations"]
        assert got[pool]["resources"] == {"DISK_GB": disk}
        [(cell, entry)] = [(u, e) for u, e in got.items() if u != pool]
        assert cell in cells
        assert entry["resources"] == {"VCPU": vcpu, "MEMORY_MB": mem}


def test_nova_style_driver_through_the_agent(direct: httpx.Client) -> None:
    root, pool = old_world(direct)
    updater = ResourceUpdater(NovaStyleDriver(NUMA), ReportClient(direct))
    assert updater.update_node("cn1").status == "failed"  # periodic: no
    [result] = updater.update_all(startup=True)
    assert result.status == "reshaped"
    check_numa_world(direct, root, pool)
    [again] = updater.update_all()
    assert (again.status, again.writes) == ("unchanged", 0)


def test_nova_style_driver_through_migrate_inventory(db: Database, tmp_path: Path) -> None:
    with PlacementDirect(make_conf(), db, latest_microversion=True) as http:
        root, pool = old_world(http)
    conf_file = tmp_path / "placement.conf"
    conf_file.write_text(
        "[placement_database]\nconnection = %s\n"
        % db.engine.url.render_as_string(hide_password=False)
    )
    env = dict(os.environ, NOVA_STYLE_DRIVER=json.dumps(NUMA), PYTHONPATH=str(REPO))

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "berth.cli",
                "migrate-inventory",
                "--config-file",
                str(conf_file),
                "--driver",
                "support.nova_style_driver:NovaStyleDriver",
                *extra,
            ],
            capture_output=True,
            text=True,
            env=env,
            cwd=REPO,
            timeout=120,
        )

    bad = run("--retries", "0")
    assert bad.returncode == 1 and "retries must be at least 1" in bad.stderr
    first = run("--retries", "2")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "cn1: reshaped" in first.stdout
    second = run()
    assert second.returncode == 0, second.stdout + second.stderr
    assert "cn1: nothing to migrate; no changes made" in second.stdout
    with PlacementDirect(make_conf(), db, latest_microversion=True) as http:
        check_numa_world(http, root, pool)
