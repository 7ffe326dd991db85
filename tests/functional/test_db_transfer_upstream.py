"""Import from, and export back to, a database built by real upstream
Placement 16.0.0, on SQLite, PostgreSQL and MariaDB.

Upstream runs from its own venv (``support/servers.py`` builds it on first
use). It builds a world through its HTTP API; Berth imports the database
and must then answer every query as upstream does on the original; the
same write made on both keeps them equal; Berth exports into a fresh
database, upstream's ``placement-manage db sync`` accepts it, and upstream
serving the export answers as upstream on the original.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from support import servers
from tests.conftest import BACKENDS

pytestmark = pytest.mark.stress

# No keep-alive: a server stops at once when no connection is open.
HEADERS = {
    "x-auth-token": "admin",
    "openstack-api-version": "placement 1.39",
    "connection": "close",
}
AGG1, AGG2 = str(uuid.uuid4()), str(uuid.uuid4())


def u(name: str) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_DNS, name))


def for_upstream(url: str) -> str:
    """The URL form upstream's venv has a driver for."""
    return url.replace("postgresql+psycopg://", "postgresql+psycopg2://")


class Api:
    def __init__(self, base: str) -> None:
        self.http = httpx.Client(base_url=base, headers=HEADERS, timeout=60)

    def call(self, method: str, path: str, body: Any = None, version: str | None = None) -> Any:
        headers = {"openstack-api-version": "placement %s" % version} if version else {}
        r = self.http.request(method, path, json=body, headers=headers)
        assert r.status_code < 300, (method, path, r.status_code, r.text)
        return r.json() if r.content else None


def build_world(api: Api) -> None:
    """Nested trees, a sharing provider in an aggregate, custom classes and
    traits, several consumers, projects, users and consumer types."""
    api.call("PUT", "/resource_classes/CUSTOM_FPGA")
    api.call("PUT", "/traits/CUSTOM_GOLD")
    for n in (1, 2, 3):
        cn = u("cn%d" % n)
        api.call("POST", "/resource_providers", {"name": "cn%d" % n, "uuid": cn})
        for numa in (0, 1):
            api.call(
                "POST",
                "/resource_providers",
                {
                    "name": "cn%d_numa%d" % (n, numa),
                    "uuid": u("cn%d_numa%d" % (n, numa)),
                    "parent_provider_uuid": cn,
                },
            )
            api.call(
                "PUT",
                "/resource_providers/%s/inventories" % u("cn%d_numa%d" % (n, numa)),
                {
                    "resource_provider_generation": 0,
                    "inventories": {
                        "VCPU": {"total": 8, "allocation_ratio": 4.0, "reserved": 1},
                        "MEMORY_MB": {
                            "total": 8192,
                            "min_unit": 256,
                            "step_size": 256,
                            "max_unit": 4096,
                            "allocation_ratio": 1.5,
                        },
                    },
                },
            )
            api.call(
                "PUT",
                "/resource_providers/%s/traits" % u("cn%d_numa%d" % (n, numa)),
                {
                    "resource_provider_generation": 1,
                    "traits": ["HW_CPU_X86_AVX2"] if numa == 0 else ["HW_CPU_X86_SSE42"],
                },
            )
        api.call(
            "PUT",
            "/resource_providers/%s/aggregates" % cn,
            {"resource_provider_generation": 0, "aggregates": [AGG1] if n < 3 else [AGG2]},
        )
    cn3 = u("cn3")
    api.call(
        "PUT",
        "/resource_providers/%s/inventories" % cn3,
        {
            "resource_provider_generation": 1,
            "inventories": {"DISK_GB": {"total": 500}, "CUSTOM_FPGA": {"total": 2}},
        },
    )
    api.call(
        "PUT",
        "/resource_providers/%s/traits" % cn3,
        {"resource_provider_generation": 2, "traits": ["CUSTOM_GOLD"]},
    )
    ss = u("shared")
    api.call("POST", "/resource_providers", {"name": "shared-disk", "uuid": ss})
    api.call(
        "PUT",
        "/resource_providers/%s/inventories" % ss,
        {
            "resource_provider_generation": 0,
            "inventories": {"DISK_GB": {"total": 2000, "reserved": 100}},
        },
    )
    api.call(
        "PUT",
        "/resource_providers/%s/traits" % ss,
        {"resource_provider_generation": 1, "traits": ["MISC_SHARES_VIA_AGGREGATE"]},
    )
    api.call(
        "PUT",
        "/resource_providers/%s/aggregates" % ss,
        {"resource_provider_generation": 2, "aggregates": [AGG1]},
    )
    api.call("POST", "/resource_providers", {"name": "empty", "uuid": u("empty")})
    claim(
        api,
        "vm-a",
        {u("cn1_numa0"): {"VCPU": 2, "MEMORY_MB": 1024}, ss: {"DISK_GB": 20}},
        "p1",
        "u1",
        "INSTANCE",
        None,
    )
    # A second write of the same consumer: its generation goes to 2.
    claim(
        api,
        "vm-a",
        {u("cn1_numa0"): {"VCPU": 4, "MEMORY_MB": 2048}, ss: {"DISK_GB": 20}},
        "p1",
        "u1",
        "INSTANCE",
        1,
    )
    claim(
        api,
        "vm-a",
        {u("cn1_numa0"): {"VCPU": 4, "MEMORY_MB": 2048}, ss: {"DISK_GB": 40}},
        "p1",
        "u1",
        "INSTANCE",
        2,
    )
    claim(
        api, "mig-b", {u("cn2_numa1"): {"VCPU": 1, "MEMORY_MB": 512}}, "p1", "u2", "MIGRATION", None
    )
    claim(
        api,
        "vm-c",
        {cn3: {"DISK_GB": 50, "CUSTOM_FPGA": 1}, u("cn3_numa0"): {"VCPU": 3}},
        "p2",
        "u1",
        "INSTANCE",
        None,
    )


def claim(
    api: Api,
    consumer: str,
    allocs: dict[str, dict[str, int]],
    project: str,
    user: str,
    ctype: str,
    generation: int | None,
) -> None:
    api.call(
        "PUT",
        "/allocations/%s" % u(consumer),
        {
            "allocations": {rp: {"resources": res} for rp, res in allocs.items()},
            "project_id": project,
            "user_id": user,
            "consumer_generation": generation,
            "consumer_type": ctype,
        },
    )


def canon(value: Any) -> Any:
    """Order-free form: lists become sorted lists of canonical items."""
    if isinstance(value, dict):
        return {k: canon(v) for k, v in value.items()}
    if isinstance(value, list):
        return sorted((canon(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    return value


CONSUMERS = ("vm-a", "mig-b", "vm-c", "vm-d")
CANDIDATES = [
    "resources=VCPU:1,MEMORY_MB:512",
    "resources=VCPU:2,MEMORY_MB:1024,DISK_GB:10",
    "resources=DISK_GB:10&member_of=%s" % AGG1,
    "resources=VCPU:1&required=HW_CPU_X86_AVX2",
    "resources=VCPU:1&required=!HW_CPU_X86_AVX2",
    "resources=CUSTOM_FPGA:1,DISK_GB:10&required=CUSTOM_GOLD",
    "resources1=VCPU:1&resources2=VCPU:1&group_policy=isolate",
    "resources1=VCPU:1,MEMORY_MB:256&resources2=DISK_GB:5&group_policy=none",
    "resources=VCPU:20",
    "resources=VCPU:1&in_tree=%s" % u("cn2"),
]


def answers(api: Api, kind: str) -> dict[str, Any]:
    """Every query the comparison covers, by path."""
    paths = [
        "/resource_providers",
        "/resource_providers?name=cn1",
        "/resource_providers?member_of=%s" % AGG1,
        "/resource_providers?member_of=in:%s,%s" % (AGG1, AGG2),
        "/resource_providers?resources=VCPU:2",
        "/resource_providers?resources=DISK_GB:100",
        "/resource_providers?required=HW_CPU_X86_AVX2",
        "/resource_providers?required=!HW_CPU_X86_AVX2",
        "/resource_providers?in_tree=%s" % u("cn1"),
        "/resource_providers?uuid=%s" % u("cn3_numa1"),
        "/resource_classes",
        "/traits?name=startswith:CUSTOM",
        "/traits?associated=true",
    ]
    listing = api.call("GET", "/resource_providers")["resource_providers"]
    for rp in sorted(p["uuid"] for p in listing):
        paths += [
            "/resource_providers/%s%s" % (rp, sub)
            for sub in ("", "/inventories", "/traits", "/aggregates", "/usages", "/allocations")
        ]
    paths += ["/allocations/%s" % u(c) for c in CONSUMERS]
    usages = ["/usages?project_id=%s" % p for p in ("p1", "p2", "p3")]
    usages += ["/usages?project_id=p1&user_id=u2"]
    if kind != "postgresql":
        # Upstream 16.0.0 answers 500 here on PostgreSQL (its GROUP BY by
        # consumer type is invalid there), so only the older form compares.
        paths += usages
    paths += ["/allocation_candidates?%s" % q for q in CANDIDATES]
    got = {p: canon(api.call("GET", p)) for p in paths}
    for version in ("1.9", "1.37"):
        got.update(
            {"%s@%s" % (p, version): canon(api.call("GET", p, version=version)) for p in usages}
        )
    return got


def same(left: dict[str, Any], right: dict[str, Any]) -> None:
    assert left.keys() == right.keys()
    diffs = [p for p in left if left[p] != right[p]]
    assert not diffs, "differ: %s\nleft %s\nright %s" % (diffs, left[diffs[0]], right[diffs[0]])


def berth_cmd(workdir: Path, berth_url: str, *args: str) -> dict[str, Any]:
    """Run ``berth db ARGS --json`` on the Berth database ``berth_url`` as
    docs/install.md shows it; return the report."""
    conf = workdir / "berth.conf"
    conf.write_text("[placement_database]\nconnection = %s\n" % berth_url)
    res = subprocess.run(
        [
            sys.executable,
            "-m",
            "berth.cli",
            "db",
            args[0],
            "--config-file",
            str(conf),
            *args[1:],
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr + res.stdout
    report = dict(json.loads(res.stdout))
    assert report["ok"] and report["revision"] == "a082b8bb98d0"
    return report


def change(api: Api) -> None:
    """Writes made while Berth runs (and, for reference, on upstream)."""
    claim(
        api, "vm-d", {u("cn2_numa0"): {"VCPU": 1, "MEMORY_MB": 256}}, "p3", "u3", "INSTANCE", None
    )
    api.call("DELETE", "/allocations/%s" % u("mig-b"))
    api.call("PUT", "/resource_classes/CUSTOM_LATER")


@pytest.mark.parametrize("new_db", BACKENDS, indirect=True)
def test_switch_to_berth_and_back(upstream_venv, new_db, tmp_path, request):
    """The steps of docs/install.md "Moving from upstream Placement"."""
    kind = request.node.callspec.params["new_db"]
    source, target, back = new_db(), new_db(), new_db()
    up = servers.Server("upstream", tmp_path / "up", db_url=for_upstream(source))
    with up:
        build_world(Api(up.url))
        before = answers(Api(up.url), kind)
    # 1. upstream is stopped; 2. import; 3. verify.
    report = berth_cmd(tmp_path, target, "import", "--from", source)
    assert report["tables"]["consumers"] == {"source": 3, "added": 0, "target": 3, "ok": True}
    berth_cmd(tmp_path, target, "verify", "--against", source)
    # 4. Berth serves the imported database and answers as upstream did.
    with servers.Server("berth", tmp_path / "berth", db_url=target) as berth:
        berth_api = Api(berth.url)
        same(before, answers(berth_api, kind))
        change(berth_api)
        up.restart(workers=1)  # the same writes on upstream, for reference
        try:
            change(Api(up.url))
            after = answers(Api(up.url), kind)
        finally:
            up.stop()
        assert after != before
        same(after, answers(berth_api, kind))
    # 5. Rolling back: export, verify, upstream's db sync, upstream serves it.
    berth_cmd(tmp_path, target, "export", "--to", back)
    berth_cmd(tmp_path, target, "verify", "--against", back)
    with servers.Server("upstream", tmp_path / "back", db_url=for_upstream(back)) as up2:
        same(after, answers(Api(up2.url), kind))
    engine = sa.create_engine(back)
    with engine.connect() as conn:
        assert conn.scalar(sa.text("SELECT version_num FROM alembic_version")) == "a082b8bb98d0"
    engine.dispose()
