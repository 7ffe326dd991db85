"""The benchmark deployment, built through the HTTP API so that Berth and
upstream receive exactly the same requests.

Default shape (``hosts=1000``): compute hosts with VCPU, MEMORY_MB and
local DISK_GB; a quarter of them modelled as nested trees (two NUMA
children holding VCPU and MEMORY_MB, two PF children with SRIOV_NET_VF on
different physnets); four shared storage pools, each serving 50 hosts that
have no local disk; ten host aggregates; CPU traits; and two existing
allocations on average per host.
"""

from __future__ import annotations

import random
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx

NS = uuid.UUID("6c1b7c52-6f34-4c55-9b6b-2c0f36f0c3a1")
ADMIN = {"x-auth-token": "admin", "accept": "application/json"}


def uid(name: str) -> str:
    return str(uuid.uuid5(NS, name))


def _v(version: str) -> dict[str, str]:
    return {**ADMIN, "openstack-api-version": "placement %s" % version}


@dataclass
class World:
    hosts: int
    aggregates: list[str] = field(default_factory=list)
    sharing_aggregates: list[str] = field(default_factory=list)


class Builder:
    def __init__(self, url: str,
                 transport: httpx.BaseTransport | None = None) -> None:
        self.http = httpx.Client(base_url=url, timeout=120,
                                 transport=transport)

    def call(self, method: str, path: str, version: str, body: object = None,
             ok: tuple[int, ...] = (200, 201, 204)) -> httpx.Response:
        r = self.http.request(method, path, json=body, headers=_v(version))
        if r.status_code not in ok:
            raise RuntimeError("%s %s -> %s %s" % (method, path,
                                                   r.status_code, r.text))
        return r

    def provider(self, name: str, parent: str | None = None) -> str:
        body = {"name": name, "uuid": uid(name)}
        if parent:
            body["parent_provider_uuid"] = parent
        self.call("POST", "/resource_providers", "1.20", body)
        return body["uuid"]

    def inventory(self, rp: str, inv: dict[str, dict[str, float]]) -> None:
        self.call("PUT", "/resource_providers/%s/inventories" % rp, "1.26",
                  {"resource_provider_generation": self.gen(rp),
                   "inventories": inv})

    def gen(self, rp: str) -> int:
        r = self.call("GET", "/resource_providers/%s" % rp, "1.14")
        return int(r.json()["generation"])

    def traits(self, rp: str, names: list[str]) -> None:
        self.call("PUT", "/resource_providers/%s/traits" % rp, "1.6",
                  {"resource_provider_generation": self.gen(rp),
                   "traits": names})

    def aggregates(self, rp: str, aggs: list[str]) -> None:
        self.call("PUT", "/resource_providers/%s/aggregates" % rp, "1.19",
                  {"resource_provider_generation": self.gen(rp),
                   "aggregates": aggs})


def _host(b: Builder, i: int, world: World, rnd: random.Random) -> None:
    name = "cn-%04d" % i
    rp = b.provider(name)
    nested = i % 4 == 0
    pool = i % 20 < 4 and not nested and i < 200 * 1  # first hosts share
    inv: dict[str, dict[str, float]] = {}
    if not nested:
        inv["VCPU"] = {"total": 32, "allocation_ratio": 4.0}
        inv["MEMORY_MB"] = {"total": 131072, "reserved": 2048,
                            "allocation_ratio": 1.0}
    if not pool:
        inv["DISK_GB"] = {"total": 2000, "reserved": 20}
    b.inventory(rp, inv)
    traits = ["HW_CPU_X86_SSE42"]
    if i % 2 == 0:
        traits.append("HW_CPU_X86_AVX2")
    if i % 10 == 0:
        traits.append("CUSTOM_FAST")
    b.traits(rp, traits)
    aggs = [world.aggregates[i % len(world.aggregates)]]
    if pool:
        aggs.append(world.sharing_aggregates[i % len(world.sharing_aggregates)])
    b.aggregates(rp, aggs)
    if nested:
        for n in range(2):
            numa = b.provider("%s-numa%d" % (name, n), parent=rp)
            b.inventory(numa, {"VCPU": {"total": 16, "allocation_ratio": 4.0},
                               "MEMORY_MB": {"total": 65536}})
            b.traits(numa, ["HW_NUMA_ROOT"])
            pf = b.provider("%s-pf%d" % (name, n), parent=numa)
            b.inventory(pf, {"SRIOV_NET_VF": {"total": 8}})
            b.traits(pf, ["CUSTOM_PHYSNET_%s" % "AB"[n]])


def build(url: str, hosts: int = 1000, seed: int = 7,
          threads: int = 4,
          transport: httpx.BaseTransport | None = None) -> World:
    """Create the deployment on the server at ``url`` (through
    ``transport`` when given: an in-process app)."""
    world = World(hosts=hosts,
                  aggregates=[uid("agg-%d" % a) for a in range(10)],
                  sharing_aggregates=[uid("share-%d" % a) for a in range(4)])
    b = Builder(url, transport)
    for name in ("CUSTOM_FAST", "CUSTOM_PHYSNET_A", "CUSTOM_PHYSNET_B"):
        b.call("PUT", "/traits/%s" % name, "1.6", ok=(201, 204))
    for n, agg in enumerate(world.sharing_aggregates):
        pool = b.provider("pool-%d" % n)
        b.inventory(pool, {"DISK_GB": {"total": 100000, "reserved": 0}})
        b.traits(pool, ["MISC_SHARES_VIA_AGGREGATE"])
        b.aggregates(pool, [agg])
    rnd = random.Random(seed)
    with ThreadPoolExecutor(threads) as pool_:
        list(pool_.map(lambda i: _host(Builder(url, transport), i, world,
                                       rnd),
                       range(hosts)))
    _allocate(b, world, random.Random(seed), count=hosts * 2)
    return world


def _allocate(b: Builder, world: World, rnd: random.Random, count: int) -> None:
    """Existing load: instances on plain hosts (VCPU, MEMORY_MB, DISK_GB)."""
    plain = [i for i in range(world.hosts) if i % 4 != 0 and not
             (i % 20 < 4 and i < 200)]
    for n in range(count):
        host = uid("cn-%04d" % rnd.choice(plain))
        body = {"allocations": {host: {"resources": {
                    "VCPU": 1 + n % 2, "MEMORY_MB": 1024, "DISK_GB": 10}}},
                "project_id": uid("project-%d" % (n % 5)),
                "user_id": uid("user"), "consumer_generation": None}
        b.call("PUT", "/allocations/%s" % uid("consumer-%d" % n), "1.28", body)


def build_explosion(url: str, pfs: int = 21,
                    transport: httpx.BaseTransport | None = None) -> None:
    """Upstream's wide-tree case: one compute with ``pfs`` PF children of
    one VF each."""
    b = Builder(url, transport)
    root = b.provider("wide-cn")
    b.inventory(root, {"VCPU": {"total": 8}})
    for n in range(pfs):
        pf = b.provider("wide-pf%02d" % n, parent=root)
        b.inventory(pf, {"SRIOV_NET_VF": {"total": 1}})
