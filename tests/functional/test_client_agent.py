"""The agent's start-up reshape, periodic error policy and the offline
``berth migrate-inventory``, end to end with the example VGPU driver."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from berth.client import ReportClient, ResourceProviderUpdateFailed
from berth.client.agent import ResourceUpdater
from berth.db import setup
from berth.db.engine import Database, create_engine
from berth.direct import PlacementDirect
from berth.examples.vgpu import VGPUDriver
from support.api_setup import ok, state, usage_totals
from support.vgpu_reshape import LAYOUT, check_new_layout, old_layout
from tests.conftest import make_conf


def test_startup_reshapes_then_nothing_to_do(direct: httpx.Client) -> None:
    root = old_layout(direct)
    before = usage_totals(direct)
    updater = ResourceUpdater(VGPUDriver(LAYOUT), ReportClient(direct))
    [result] = updater.update_all(startup=True)
    assert result.status == "reshaped"
    check_new_layout(direct, root, before)
    snapshot = state(direct)
    [again] = updater.update_all(startup=True)
    assert (again.status, again.writes) == ("unchanged", 0)
    assert state(direct) == snapshot


def test_periodic_pass_never_reshapes(direct: httpx.Client) -> None:
    old_layout(direct)
    before = state(direct)
    updater = ResourceUpdater(VGPUDriver(LAYOUT), ReportClient(direct))
    [result] = updater.update_all(startup=False)
    assert result.status == "failed" and "VGPU" in (result.error or "")
    assert state(direct) == before


RACE_TRAITS = [
    "HW_CPU_X86_AVX",
    "HW_CPU_X86_AVX2",
    "HW_CPU_X86_SSE",
    "HW_CPU_X86_SSE2",
    "HW_CPU_X86_SSE3",
]


class RacedDriver(VGPUDriver):
    """Another writer changes the root under the driver's feet, on the
    first ``races`` calls."""

    def __init__(self, http: httpx.Client, vcpus: int = 8, races: int = 1) -> None:
        super().__init__({"cn1": {**LAYOUT["cn1"], "vcpus": vcpus}}, nested=False)
        self.http = http
        self.races = races
        self.calls = 0

    def update_provider_tree(
        self, provider_tree: Any, nodename: str, allocations: Any = None
    ) -> None:
        self.calls += 1
        if self.calls <= self.races:
            root = provider_tree.data(nodename)
            traits = sorted(root.traits | {RACE_TRAITS[self.calls - 1]})
            ok(
                self.http.put(
                    "/resource_providers/%s/traits" % root.uuid,
                    json={"traits": traits, "resource_provider_generation": root.generation},
                )
            )
        super().update_provider_tree(provider_tree, nodename, allocations)


@pytest.mark.parametrize("startup", [True, False])
def test_conflict_refreshes_and_retries(direct: httpx.Client, startup: bool) -> None:
    client = ReportClient(direct)
    root = client.get_provider_tree_and_ensure_root("cn1").data("cn1").uuid
    driver = RacedDriver(direct, races=3)
    result = ResourceUpdater(driver, client).update_node("cn1", startup=startup)
    # Three conflicts, then the fourth (last allowed) attempt succeeds,
    # keeping what the other writer did.
    assert (result.status, driver.calls) == ("updated", 4)
    traits = ok(direct.get("/resource_providers/%s/traits" % root))["traits"]
    assert traits == sorted(RACE_TRAITS[:3])
    inv = ok(direct.get("/resource_providers/%s/inventories" % root))
    assert inv["inventories"]["VCPU"]["total"] == 8


def test_conflicts_beyond_retries_are_not_fatal_at_startup(direct: httpx.Client) -> None:
    client = ReportClient(direct, retries=2)
    client.get_provider_tree_and_ensure_root("cn1")
    driver = RacedDriver(direct, races=5)
    updater = ResourceUpdater(driver, client)
    result = updater.update_node("cn1", startup=True)
    assert result.status == "failed" and driver.calls == 2
    assert "concurrent" in (result.error or "") or "409" in (result.error or "")
    with pytest.raises(ResourceProviderUpdateFailed) as info:
        updater.sync_node("cn1", startup=True)  # the raw pass propagates
    assert info.value.is_conflict and driver.calls == 4
    # The cache was refreshed: once the other writer stops, a pass works.
    assert updater.update_node("cn1").status == "updated"
    with pytest.raises(ValueError):
        ReportClient(direct, retries=0)


def _run_cli(conf_file: Path, *extra: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, BERTH_EXAMPLE_VGPU=json.dumps(LAYOUT))
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "berth.cli",
            "migrate-inventory",
            "--config-file",
            str(conf_file),
            "--driver",
            "berth.examples.vgpu:VGPUDriver",
            *extra,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


def test_offline_migrate_inventory_on_sqlite(tmp_path: Path) -> None:
    url = "sqlite:///%s" % (tmp_path / "placement.sqlite")
    engine = create_engine(url)
    setup.prepare(engine)
    conf_file = tmp_path / "placement.conf"
    conf_file.write_text("[placement_database]\nconnection = %s\n" % url)
    try:
        with PlacementDirect(make_conf(), Database(engine), "latest") as http:
            root = old_layout(http)
            before = usage_totals(http)
        first = _run_cli(conf_file, "--nodename", "cn1")
        assert first.returncode == 0, first.stderr
        assert "cn1: reshaped" in first.stdout
        second = _run_cli(conf_file)
        assert second.returncode == 0, second.stderr
        assert "cn1: nothing to migrate; no changes made" in second.stdout
        with PlacementDirect(make_conf(), Database(engine), "latest") as http:
            check_new_layout(http, root, before)
        bad = _run_cli(conf_file, "--nodename", "compute-9")
        assert bad.returncode == 1
        assert bad.stdout.strip() == (
            "compute-9: failed: the driver has no node compute-9 (its nodes: cn1)"
        )
    finally:
        engine.dispose()
