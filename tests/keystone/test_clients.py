"""Real clients through Keystone's catalog against a running ``berth
serve``: the operator CLI (osc-placement) with password auth, and
``berth.client.ReportClient`` over a keystoneauth session as the nova
service user, running the agent's start-up sync with a reshape."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from typing import Any

import httpx
import pytest
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

from berth.client import ReportClient
from berth.client.agent import ResourceUpdater
from berth.examples.vgpu import VGPUDriver
from support import keystone as harness
from support import vgpu_reshape
from support.api_setup import usage_totals
from support.keystone import Keystone

pytestmark = pytest.mark.stress


def _osc(keystone: Keystone, *args: str) -> Any:
    """``openstack <args> -f json`` as admin, through the catalog."""
    env = dict(
        os.environ,
        OS_AUTH_URL=keystone.url + "/v3",
        OS_IDENTITY_API_VERSION="3",
        OS_USERNAME="admin",
        OS_PASSWORD=harness.ADMIN_PASSWORD,
        OS_PROJECT_NAME="admin",
        OS_USER_DOMAIN_NAME=harness.DOMAIN,
        OS_PROJECT_DOMAIN_NAME=harness.DOMAIN,
        OS_REGION_NAME=harness.REGION,
        OS_INTERFACE="public",
        OS_PLACEMENT_API_VERSION="1.39",
    )
    proc = subprocess.run(
        [str(harness.VENV / "bin" / "openstack"), *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout) if "json" in args else proc.stdout


def test_osc_placement_through_the_catalog(keystone, sqlite_server):
    rp = _osc(keystone, "resource", "provider", "create", "cn1", "-f", "json")
    _osc(
        keystone,
        "resource",
        "provider",
        "inventory",
        "set",
        rp["uuid"],
        "--resource",
        "VCPU=8",
        "--resource",
        "MEMORY_MB=4096",
        "-f",
        "json",
    )
    listed = _osc(keystone, "resource", "provider", "list", "-f", "json")
    assert [p["name"] for p in listed] == ["cn1"]
    consumer = str(uuid.uuid4())
    _osc(
        keystone,
        "resource",
        "provider",
        "allocation",
        "set",
        consumer,
        "--allocation",
        "rp=%s,VCPU=2,MEMORY_MB=512" % rp["uuid"],
        "--project-id",
        keystone.ids["project:tenant-a"],
        "--user-id",
        keystone.ids["user:alice"],
        "--consumer-type",
        "INSTANCE",
        "-f",
        "json",
    )
    usage = _osc(keystone, "resource", "provider", "usage", "show", rp["uuid"], "-f", "json")
    assert {u["resource_class"]: u["usage"] for u in usage} == {"VCPU": 2, "MEMORY_MB": 512}
    candidates = _osc(
        keystone, "allocation", "candidate", "list", "--resource", "VCPU=6", "-f", "json"
    )
    assert [c["resource provider"] for c in candidates] == [rp["uuid"]]
    assert (
        _osc(keystone, "allocation", "candidate", "list", "--resource", "VCPU=7", "-f", "json")
        == []
    )


def test_report_client_startup_reshape_as_nova(keystone, berth_server):
    auth = v3.Password(
        auth_url=keystone.url + "/v3",
        username="nova",
        password=harness.PASSWORD,
        project_name="service",
        user_domain_name=harness.DOMAIN,
        project_domain_name=harness.DOMAIN,
    )
    sess = ks_session.Session(auth=auth)
    token = sess.get_token()
    # The driver's old layout, written as the nova user over plain HTTP.
    with httpx.Client(
        base_url=berth_server,
        headers={"x-auth-token": token, "openstack-api-version": "placement latest"},
    ) as http:
        root = vgpu_reshape.old_layout(http)
        before = usage_totals(http)
        # The start-up sync finds Placement through the catalog.
        updater = ResourceUpdater(VGPUDriver(vgpu_reshape.LAYOUT), ReportClient(sess))
        [result] = updater.update_all(startup=True)
        assert result.status == "reshaped", result.error
        vgpu_reshape.check_new_layout(http, root, before)
        [again] = updater.update_all(startup=True)
        assert (again.status, again.writes) == ("unchanged", 0)
    sess.session.close()
