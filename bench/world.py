"""The benchmark deployment: one plan, written either through the HTTP API
(``build``: Berth and upstream receive exactly the same requests) or in bulk
straight into Berth's tables (``bulk.write``: 50,000 hosts in seconds).

Default shape (``hosts=1000``): compute hosts with VCPU, MEMORY_MB and
local DISK_GB; a quarter of them modelled as nested trees (two NUMA
children holding VCPU and MEMORY_MB, each with a PF child holding
SRIOV_NET_VF on physnet A or B); four shared storage pools serving 40
hosts that have no local disk (10 of them nested); ten host aggregates; CPU traits; and two
existing allocations on average per host. Larger worlds keep the same
proportions: one aggregate per 100 hosts, one pool per 250, and pool
clients among the first fifth of the hosts.

The ``devices`` shape (``plan(..., shape="devices")``) is the tree Nova,
Neutron and Cyborg make when devices are modelled in Placement: each host
is a root holding DISK_GB (or a pool client's none) with 20 children:
two NUMA cells holding VCPU and MEMORY_MB (``HW_NUMA_ROOT``), each with
two PFs holding SRIOV_NET_VF on physnet A or B; six physical GPUs
holding VGPU of one of two types; a Neutron agent with two bridges
holding bandwidth; and five PCI devices of a custom class. Existing
instances take VCPU and MEMORY_MB from a NUMA cell. At 50,000 hosts it
is a million providers (``DEVICE_REQUEST`` is the Nova-shaped query).
"""

from __future__ import annotations

import functools
import random
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import httpx

NS = uuid.UUID("6c1b7c52-6f34-4c55-9b6b-2c0f36f0c3a1")
ADMIN = {"x-auth-token": "admin", "accept": "application/json"}
#: Custom traits the plan uses (created before any provider).
CUSTOM_TRAITS = (
    "CUSTOM_FAST",
    "CUSTOM_PHYSNET_A",
    "CUSTOM_PHYSNET_B",
    "CUSTOM_VGPU_TYPE_A",
    "CUSTOM_VGPU_TYPE_B",
    "CUSTOM_VNIC_TYPE_NORMAL",
)
#: The world's shapes (``plan``'s ``shape``).
SHAPES = ("default", "devices")
#: Children of each host in the ``devices`` shape.
DEVICE_CHILDREN = 20
#: The custom class of the ``devices`` shape's PCI devices.
PCI_CLASS = "CUSTOM_PCI_10DE_1EB8"
#: A Nova-shaped request on the ``devices`` shape (microversion 1.33 or
#: later): VCPU and memory from one NUMA cell, one VF on physnet A, one
#: vGPU and the root's (or a pool's) disk.
DEVICE_REQUEST = (
    "resources_NUMA=VCPU:2,MEMORY_MB:4096&required_NUMA=HW_NUMA_ROOT"
    "&resources_VF=SRIOV_NET_VF:1&required_VF=CUSTOM_PHYSNET_A"
    "&resources_GPU=VGPU:1&resources=DISK_GB:20&group_policy=none"
)

Inventory = dict[str, dict[str, float]]


@functools.cache
def uid(name: str) -> str:
    return str(uuid.uuid5(NS, name))


def _v(version: str) -> dict[str, str]:
    return {**ADMIN, "openstack-api-version": "placement %s" % version}


@dataclass
class ProviderPlan:
    """One provider as the API would be told about it: created, then its
    inventory, traits and aggregates each set once (when given)."""

    name: str
    parent: str | None = None
    inventory: Inventory = field(default_factory=dict)
    traits: list[str] = field(default_factory=list)
    aggregates: list[str] = field(default_factory=list)

    @property
    def uuid(self) -> str:
        return uid(self.name)


@dataclass
class AllocationPlan:
    """One consumer's allocation against one provider (``PUT
    /allocations/{consumer}`` at 1.28 with a null consumer generation)."""

    consumer: str
    provider: str
    resources: dict[str, int]
    project: str
    user: str


@dataclass
class World:
    hosts: int
    aggregates: list[str] = field(default_factory=list)
    sharing_aggregates: list[str] = field(default_factory=list)
    #: Providers in creation order, each root before its children.
    providers: list[ProviderPlan] = field(default_factory=list)
    allocations: list[AllocationPlan] = field(default_factory=list)


def _is_nested(i: int) -> bool:
    return i % 4 == 0


def _is_pool_client(i: int, hosts: int) -> bool:
    """Hosts whose disk is a sharing pool's (some nested ones too, so that
    a granular query's unnumbered DISK_GB can be served by a pool)."""
    return i % 20 < 4 and i < hosts // 5


def _host_labels(i: int, world: World, traits: list[str]) -> tuple[list[str], list[str]]:
    """Host ``i``'s traits (``traits``, AVX2 on half the hosts and
    CUSTOM_FAST on a tenth) and aggregates (one of the host aggregates,
    and a pool's for a pool client)."""
    if i % 2 == 0:
        traits.append("HW_CPU_X86_AVX2")
    if i % 10 == 0:
        traits.append("CUSTOM_FAST")
    aggs = [world.aggregates[i % len(world.aggregates)]]
    if _is_pool_client(i, world.hosts):
        aggs.append(world.sharing_aggregates[i % len(world.sharing_aggregates)])
    return traits, aggs


def _host(i: int, world: World) -> list[ProviderPlan]:
    name = "cn-%04d" % i
    nested = _is_nested(i)
    pool = _is_pool_client(i, world.hosts)
    inv: Inventory = {}
    if not nested:
        inv["VCPU"] = {"total": 32, "allocation_ratio": 4.0}
        inv["MEMORY_MB"] = {"total": 131072, "reserved": 2048, "allocation_ratio": 1.0}
    if not pool:
        inv["DISK_GB"] = {"total": 2000, "reserved": 20}
    traits, aggs = _host_labels(i, world, ["HW_CPU_X86_SSE42"])
    host = ProviderPlan(name, None, inv, traits, aggs)
    out = [host]
    if nested:
        for n in range(2):
            numa = ProviderPlan(
                "%s-numa%d" % (name, n),
                host.uuid,
                {"VCPU": {"total": 16, "allocation_ratio": 4.0}, "MEMORY_MB": {"total": 65536}},
                ["HW_NUMA_ROOT"],
            )
            pf = ProviderPlan(
                "%s-pf%d" % (name, n),
                numa.uuid,
                {"SRIOV_NET_VF": {"total": 8}},
                ["CUSTOM_PHYSNET_%s" % "AB"[n]],
            )
            out += [numa, pf]
    return out


def _device_host(i: int, world: World) -> list[ProviderPlan]:
    """Host ``i`` of the ``devices`` shape: its root, then its 20
    children (each parent before its children)."""
    name = "cn-%05d" % i
    pool = _is_pool_client(i, world.hosts)
    traits, aggs = _host_labels(i, world, ["HW_CPU_X86_SSE42", "COMPUTE_VOLUME_MULTI_ATTACH"])
    disk: Inventory = {} if pool else {"DISK_GB": {"total": 4000, "reserved": 40}}
    host = ProviderPlan(name, None, disk, traits, aggs)
    out = [host]
    for n in range(2):
        numa = ProviderPlan(
            "%s-numa%d" % (name, n),
            host.uuid,
            {
                "VCPU": {"total": 32, "allocation_ratio": 4.0},
                "MEMORY_MB": {"total": 196608, "reserved": 2048, "allocation_ratio": 1.0},
            },
            ["HW_NUMA_ROOT"],
        )
        out.append(numa)
        for f in range(2):
            out.append(
                ProviderPlan(
                    "%s-numa%d-pf%d" % (name, n, f),
                    numa.uuid,
                    {"SRIOV_NET_VF": {"total": 16}},
                    ["CUSTOM_PHYSNET_%s" % "AB"[f], "HW_NIC_SRIOV"],
                )
            )
    for g in range(6):
        out.append(
            ProviderPlan(
                "%s-gpu%d" % (name, g),
                host.uuid,
                {"VGPU": {"total": 4}},
                ["CUSTOM_VGPU_TYPE_%s" % "AB"[g % 2]],
            )
        )
    agent = ProviderPlan("%s-ovs-agent" % name, host.uuid)
    out.append(agent)
    for b, physnet in enumerate("AB"):
        out.append(
            ProviderPlan(
                "%s-ovs-br%d" % (name, b),
                agent.uuid,
                {
                    "NET_BW_EGR_KILOBIT_PER_SEC": {"total": 10000000},
                    "NET_BW_IGR_KILOBIT_PER_SEC": {"total": 10000000},
                },
                ["CUSTOM_PHYSNET_%s" % physnet, "CUSTOM_VNIC_TYPE_NORMAL"],
            )
        )
    for d in range(5):
        out.append(ProviderPlan("%s-pci%d" % (name, d), host.uuid, {PCI_CLASS: {"total": 1}}))
    return out


def plan(
    hosts: int = 1000, seed: int = 7, allocations: int | None = None, shape: str = "default"
) -> World:
    """The deployment for ``hosts`` compute hosts with ``allocations``
    existing instances (default: two per host), in ``shape`` (one of
    ``SHAPES``)."""
    if shape not in SHAPES:
        raise ValueError("no such shape: %s" % shape)
    world = World(
        hosts=hosts,
        aggregates=[uid("agg-%d" % a) for a in range(max(10, hosts // 100))],
        sharing_aggregates=[uid("share-%d" % a) for a in range(max(4, hosts // 250))],
    )
    for n, agg in enumerate(world.sharing_aggregates):
        world.providers.append(
            ProviderPlan(
                "pool-%d" % n,
                None,
                {"DISK_GB": {"total": 100000, "reserved": 0}},
                ["MISC_SHARES_VIA_AGGREGATE"],
                [agg],
            )
        )
    if shape == "devices":
        return _with_device_instances(
            world, seed, hosts * 2 if allocations is None else allocations
        )
    for i in range(hosts):
        world.providers += _host(i, world)
    rnd = random.Random(seed)
    plain = [i for i in range(hosts) if not _is_nested(i) and not _is_pool_client(i, hosts)]
    for n in range(hosts * 2 if allocations is None else allocations):
        world.allocations.append(
            AllocationPlan(
                uid("consumer-%d" % n),
                uid("cn-%04d" % rnd.choice(plain)),
                {"VCPU": 1 + n % 2, "MEMORY_MB": 1024, "DISK_GB": 10},
                uid("project-%d" % (n % 5)),
                uid("user"),
            )
        )
    return world


def _with_device_instances(world: World, seed: int, allocations: int) -> World:
    """``world`` (its pools planned) with the ``devices`` shape's hosts
    and ``allocations`` instances, each on a NUMA cell of a host drawn
    at random."""
    for i in range(world.hosts):
        world.providers += _device_host(i, world)
    rnd = random.Random(seed)
    for n in range(allocations):
        host = rnd.randrange(world.hosts)
        world.allocations.append(
            AllocationPlan(
                uid("consumer-%d" % n),
                uid("cn-%05d-numa%d" % (host, n % 2)),
                {"VCPU": 2, "MEMORY_MB": 4096},
                uid("project-%d" % (n % 5)),
                uid("user"),
            )
        )
    return world


class Builder:
    def __init__(self, url: str, transport: httpx.BaseTransport | None = None) -> None:
        self.http = httpx.Client(base_url=url, timeout=120, transport=transport)

    def call(
        self,
        method: str,
        path: str,
        version: str,
        body: object = None,
        ok: tuple[int, ...] = (200, 201, 204),
    ) -> httpx.Response:
        r = self.http.request(method, path, json=body, headers=_v(version))
        if r.status_code not in ok:
            raise RuntimeError("%s %s -> %s %s" % (method, path, r.status_code, r.text))
        return r

    def provider(self, name: str, parent: str | None = None) -> str:
        body = {"name": name, "uuid": uid(name)}
        if parent:
            body["parent_provider_uuid"] = parent
        self.call("POST", "/resource_providers", "1.20", body)
        return body["uuid"]

    def inventory(self, rp: str, inv: Inventory) -> None:
        self.call(
            "PUT",
            "/resource_providers/%s/inventories" % rp,
            "1.26",
            {"resource_provider_generation": self.gen(rp), "inventories": inv},
        )

    def gen(self, rp: str) -> int:
        r = self.call("GET", "/resource_providers/%s" % rp, "1.14")
        return int(r.json()["generation"])

    def traits(self, rp: str, names: list[str]) -> None:
        self.call(
            "PUT",
            "/resource_providers/%s/traits" % rp,
            "1.6",
            {"resource_provider_generation": self.gen(rp), "traits": names},
        )

    def aggregates(self, rp: str, aggs: list[str]) -> None:
        self.call(
            "PUT",
            "/resource_providers/%s/aggregates" % rp,
            "1.19",
            {"resource_provider_generation": self.gen(rp), "aggregates": aggs},
        )

    def apply(self, p: ProviderPlan) -> None:
        """Create one planned provider with what it holds."""
        rp = self.provider(p.name, p.parent)
        if p.inventory:
            self.inventory(rp, p.inventory)
        if p.traits:
            self.traits(rp, p.traits)
        if p.aggregates:
            self.aggregates(rp, p.aggregates)

    def allocate(self, a: AllocationPlan) -> None:
        body = {
            "allocations": {a.provider: {"resources": a.resources}},
            "project_id": a.project,
            "user_id": a.user,
            "consumer_generation": None,
        }
        self.call("PUT", "/allocations/%s" % a.consumer, "1.28", body)


def build(
    url: str,
    hosts: int = 1000,
    seed: int = 7,
    threads: int = 4,
    allocations: int | None = None,
    transport: httpx.BaseTransport | None = None,
    shape: str = "default",
) -> World:
    """Create the deployment on the server at ``url`` (through
    ``transport`` when given: an in-process app)."""
    world = plan(hosts, seed, allocations, shape)
    b = Builder(url, transport)
    for name in CUSTOM_TRAITS:
        b.call("PUT", "/traits/%s" % name, "1.6", ok=(201, 204))
    if shape == "devices":
        b.call("PUT", "/resource_classes/%s" % PCI_CLASS, "1.7", ok=(201, 204))
    pools = len(world.sharing_aggregates)
    for p in world.providers[:pools]:
        b.apply(p)
    # One host's tree per task: a child is created after its parent.
    trees: list[list[ProviderPlan]] = []
    for p in world.providers[pools:]:
        if p.parent is None:
            trees.append([])
        trees[-1].append(p)

    def one_tree(tree: list[ProviderPlan]) -> None:
        tb = Builder(url, transport)
        for p in tree:
            tb.apply(p)

    with ThreadPoolExecutor(threads) as pool_:
        list(pool_.map(one_tree, trees))
    for a in world.allocations:
        b.allocate(a)
    return world


def build_explosion(url: str, pfs: int = 21, transport: httpx.BaseTransport | None = None) -> None:
    """Upstream's wide-tree case: one compute with ``pfs`` PF children of
    one VF each."""
    b = Builder(url, transport)
    root = b.provider("wide-cn")
    b.inventory(root, {"VCPU": {"total": 8}})
    for n in range(pfs):
        pf = b.provider("wide-pf%02d" % n, parent=root)
        b.inventory(pf, {"SRIOV_NET_VF": {"total": 1}})
