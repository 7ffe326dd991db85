"""What test_bench_bulk.py compares: every answer a reader could get
about a world ``bench/world.py`` built (``dump``), the size of that world
and the candidate queries asked of it."""

from __future__ import annotations

from typing import Any

import httpx

from bench import world as bench_world

HOSTS, ALLOCATIONS = 40, 60
BULK_QUERIES = [
    "resources=VCPU:1,MEMORY_MB:1024,DISK_GB:10",
    "resources=VCPU:1,MEMORY_MB:1024,DISK_GB:10&required=HW_CPU_X86_AVX2,!CUSTOM_FAST",
    "resources=VCPU:1,DISK_GB:500&member_of=" + bench_world.uid("share-1"),
    (
        "resources=DISK_GB:10&resources_CPU=VCPU:2,MEMORY_MB:2048&required_CPU=HW_NUMA_ROOT"
        "&resources_NIC=SRIOV_NET_VF:1&required_NIC=CUSTOM_PHYSNET_A"
        "&same_subtree=_CPU,_NIC&group_policy=isolate"
    ),
]


def dump(client: httpx.Client, world: bench_world.World) -> dict[str, Any]:
    """Every answer a reader could get about ``world``."""
    out: dict[str, Any] = {}
    rps = client.get("/resource_providers").json()["resource_providers"]
    out["providers"] = sorted(rps, key=lambda p: p["uuid"])
    for p in out["providers"]:
        base = "/resource_providers/%s" % p["uuid"]
        for part in ("inventories", "traits", "aggregates", "usages", "allocations"):
            out[base + "/" + part] = client.get(base + "/" + part).json()
    for a in world.allocations:
        path = "/allocations/%s" % a.consumer
        out[path] = client.get(path).json()
    for n in range(5):
        path = "/usages?project_id=%s" % bench_world.uid("project-%d" % n)
        out[path] = client.get(path).json()
    for q in BULK_QUERIES:
        out[q] = client.get("/allocation_candidates?" + q).json()
    for q in ("resources=VCPU:8", "required=CUSTOM_FAST", "member_of=" + bench_world.uid("agg-3")):
        out["rp?" + q] = client.get("/resource_providers?" + q).json()
    return out
