"""A small seeded cloud for the dashboard tests (in-process and in the
browser): 24 compute trees (a root and two NUMA children; host 4 is
disabled), a shared disk pool serving the first eight (whose uuid sorts
before the hosts', its name after), and 60 consumers over two projects, three
users and two consumer types. Written through the HTTP API, so any
``httpx.Client`` with an admin token works."""

from __future__ import annotations

from typing import Any

import httpx

HOSTS = 24
CONSUMERS = 60
AGG = "aaaaaaaa-0000-4000-8000-000000000001"
POOL = "00000000-0000-4000-8000-00000000ffff"
#: The compute host an operator disabled (Nova's trait on its root).
DISABLED = 4


def rp_uuid(host: int, child: int = 0) -> str:
    return "00000000-0000-4000-8000-%06d%06d" % (host, child)


def consumer_uuid(n: int) -> str:
    return "cccccccc-0000-4000-8000-%012d" % n


def _ok(resp: httpx.Response, *codes: int) -> httpx.Response:
    assert resp.status_code in codes, (resp.status_code, resp.text)
    return resp


def _provider(c: httpx.Client, uuid: str, name: str, parent: str | None = None) -> None:
    body: dict[str, Any] = {"uuid": uuid, "name": name}
    if parent:
        body["parent_provider_uuid"] = parent
    _ok(c.post("/resource_providers", json=body), 200)


def _gen(c: httpx.Client, uuid: str) -> int:
    return int(_ok(c.get("/resource_providers/" + uuid), 200).json()["generation"])


def _put(c: httpx.Client, uuid: str, what: str, body: dict[str, Any]) -> None:
    body["resource_provider_generation"] = _gen(c, uuid)
    _ok(c.put("/resource_providers/%s/%s" % (uuid, what), json=body), 200)


def seed(c: httpx.Client) -> None:
    """Write the world (the database must be empty)."""
    for h in range(1, HOSTS + 1):
        root = rp_uuid(h)
        _provider(c, root, "compute-%02d" % h)
        _put(c, root, "inventories", {"inventories": {"DISK_GB": {"total": 500, "reserved": 20}}})
        if h <= 8:
            _put(c, root, "aggregates", {"aggregates": [AGG]})
        if h == DISABLED:
            _put(c, root, "traits", {"traits": ["COMPUTE_STATUS_DISABLED"]})
        for n in (1, 2):
            numa = rp_uuid(h, n)
            _provider(c, numa, "compute-%02d-numa%d" % (h, n), root)
            _put(
                c,
                numa,
                "inventories",
                {
                    "inventories": {
                        "VCPU": {"total": 16, "allocation_ratio": 4.0},
                        "MEMORY_MB": {"total": 65536, "reserved": 512},
                    }
                },
            )
            if h % 3 == 0:
                _put(c, numa, "traits", {"traits": ["HW_CPU_X86_AVX2"]})
    _provider(c, POOL, "disk-pool")
    _put(c, POOL, "inventories", {"inventories": {"DISK_GB": {"total": 100000}}})
    _put(c, POOL, "traits", {"traits": ["MISC_SHARES_VIA_AGGREGATE"]})
    _put(c, POOL, "aggregates", {"aggregates": [AGG]})
    for n in range(CONSUMERS):
        host = n % 6 + 1  # the first six hosts fill up
        resources: dict[str, dict[str, Any]] = {
            rp_uuid(host, n % 2 + 1): {"resources": {"VCPU": 4, "MEMORY_MB": 4096}}
        }
        if n % 4 == 0:
            resources[POOL] = {"resources": {"DISK_GB": 100}}
        body = {
            "allocations": resources,
            "project_id": "project-%d" % (n % 2),
            "user_id": "user-%d" % (n % 3),
            "consumer_generation": None,
            "consumer_type": "MIGRATION" if n % 10 == 0 else "INSTANCE",
        }
        _ok(c.put("/allocations/" + consumer_uuid(n), json=body), 204)
