"""Thousands of compute agents syncing with Berth: requests and server CPU
per agent-minute, idle and at a 1% change rate.

    .venv/bin/python bench/agents.py                      # 10,000 agents
    .venv/bin/python bench/agents.py --agents 1000 --minutes 5

Every agent is what ``berth.client.agent`` runs on a compute host: a driver (a
root with VCPU, MEMORY_MB and DISK_GB; on 30% of hosts two NUMA children
with HW_NUMA_ROOT) and its own ``ReportClient`` with its own cache. They
all talk to one Berth app in-process (``PlacementDirect`` over an SQLite
file, or ``--db-url``). Simulated time: every simulated minute each agent
syncs once, at its own second of the minute, and the clients' clocks
follow, so the 300 s association refresh comes round as it would in a
day of real time. Server CPU is the CPU time spent inside the WSGI call
of each request (the app runs in this process, so the figure excludes
the clients).

Phases, each measured separately:

1. build: every agent's first sync (creates its providers);
2. idle: ``--minutes`` minutes in which nothing changes;
3. change: ``--minutes`` minutes in which 1% of the agents (a different
   random 1% each minute) report a changed VCPU total;
4. uncached, for comparison: a sample of agents whose client forgets its
   cache before every sync (what every sync cost before the cache), idle.

``--compare-feed`` measures instead what ``ReportClient(change_feed=True)``
saves against the per-tree check at the same refresh interval
(``--interval``, default 60 s): the same fleet and the same changes, run
once per mode, each on a fresh database. Every agent manages
``--trees-per-agent`` compute trees (a root and two NUMA children each)
and syncs once per round (one round per interval); the scenarios: the
first round after every agent's first sync (a follower then catches up
on the events of the agents built after it); then, ``--minutes`` rounds
each: idle; an operator setting a trait on 1% of the
roots and aggregates on another 1% each round; claims landing on 10% of
the trees each round while 1% of the drivers change their VCPU total
(the operator's writes and the claims are not counted).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from berth import conf as berth_conf
from berth.client import ProviderTree, ReportClient
from berth.client.agent import ResourceUpdater
from berth.db import setup
from berth.db.engine import Database, create_engine
from berth.direct import PlacementDirect


class Counting(httpx.BaseTransport):
    """Counts requests and writes and sums the CPU of each WSGI call."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner
        self.reset()

    def reset(self) -> None:
        self.requests = self.writes = 0
        self.cpu = 0.0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        start = time.process_time()
        response = self.inner.handle_request(request)
        response.read()
        self.cpu += time.process_time() - start
        self.requests += 1
        self.writes += request.method != "GET"
        return response


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


class HostDriver:
    """One compute host: a root, and on NUMA hosts two cells."""

    def __init__(self, name: str, numa: bool) -> None:
        self.name = name
        self.numa = numa
        self.vcpus = 32

    def get_available_nodes(self) -> list[str]:
        return [self.name]

    def update_provider_tree(
        self, provider_tree: ProviderTree, nodename: str, allocations: Any = None
    ) -> None:
        inv = {"DISK_GB": {"total": 1000}}
        if not self.numa:
            inv["VCPU"] = {"total": self.vcpus}
            inv["MEMORY_MB"] = {"total": 65536}
        provider_tree.update_inventory(nodename, inv)
        if not self.numa:
            return
        for cell in range(2):
            name = "%s_numa%d" % (nodename, cell)
            if not provider_tree.exists(name):
                provider_tree.new_child(name, nodename)
            provider_tree.update_inventory(
                name, {"VCPU": {"total": self.vcpus // 2}, "MEMORY_MB": {"total": 32768}}
            )
            provider_tree.update_traits(name, ["HW_NUMA_ROOT"])


class Agent:
    def __init__(self, http: httpx.Client, index: int, count: int, numa: bool) -> None:
        # Its whole second of the minute (whole seconds keep the 300 s
        # refresh arithmetic exact in floating point).
        self.offset = float(60 * index // count)
        self.clock = Clock()
        self.driver = HostDriver("host-%05d" % index, numa)
        self.client = ReportClient(http, clock=self.clock)
        self.updater = ResourceUpdater(self.driver, self.client)

    def sync(self, minute: int) -> str:
        self.clock.now = minute * 60.0 + self.offset
        return self.updater.update_node(self.driver.name).status


def _phase(
    transport: Counting,
    agents: list[Agent],
    minutes: range,
    rng: random.Random | None = None,
    forget: bool = False,
) -> dict[str, Any]:
    transport.reset()
    started = time.monotonic()
    statuses: dict[str, int] = {}
    for minute in minutes:
        changing = (
            set(rng.sample(range(len(agents)), max(1, len(agents) // 100)))
            if rng is not None
            else set()
        )
        for i, agent in enumerate(agents):
            if i in changing:
                agent.driver.vcpus += 2 if agent.driver.vcpus < 40 else -2
            if forget:
                agent.client.clear_provider_cache()
            status = agent.sync(minute)
            statuses[status] = statuses.get(status, 0) + 1
    agent_minutes = len(agents) * len(minutes)
    return {
        "agents": len(agents),
        "minutes": len(minutes),
        "statuses": statuses,
        "requests": transport.requests,
        "writes": transport.writes,
        "server_cpu_s": round(transport.cpu, 3),
        "wall_s": round(time.monotonic() - started, 1),
        "requests_per_agent_minute": round(transport.requests / agent_minutes, 4),
        "writes_per_agent_minute": round(transport.writes / agent_minutes, 4),
        "server_cpu_ms_per_agent_minute": round(1000 * transport.cpu / agent_minutes, 4),
    }


class Fleet:
    """One agent's compute trees: a root with DISK_GB and two NUMA cells."""

    def __init__(self, driver: HostDriver, names: list[str]) -> None:
        self.driver, self.names = driver, names

    def get_available_nodes(self) -> list[str]:
        return list(self.names)

    def update_provider_tree(
        self, provider_tree: ProviderTree, nodename: str, allocations: Any = None
    ) -> None:
        self.driver.update_provider_tree(provider_tree, nodename)


def _fleet(
    http: httpx.Client, direct: httpx.Client, args: Any, feed: bool
) -> tuple[list[tuple[Clock, float, ResourceUpdater]], list[str]]:
    """The agents (clock, offset, updater) after their first sync, and
    the uuids of every root."""
    agents = []
    for i in range(args.agents):
        names = ["host-%05d-%d" % (i, t) for t in range(args.trees_per_agent)]
        clock = Clock()
        client = ReportClient(
            http, clock=clock, change_feed=feed, association_refresh=args.interval
        )
        updater = ResourceUpdater(Fleet(HostDriver(names[0], True), names), client)
        offset = float(int(args.interval) * i // args.agents)
        clock.now = offset
        updater.update_all()
        agents.append((clock, offset, updater))
    rows = direct.get("/resource_providers").json()["resource_providers"]
    return agents, [r["uuid"] for r in rows if r["parent_provider_uuid"] is None]


def _operator(direct: httpx.Client, roots: list[str], rng: random.Random) -> None:
    """An operator's trait on 1% of the roots, aggregates on another 1%."""
    chosen = rng.sample(roots, 2 * max(1, len(roots) // 100))
    for n, root in enumerate(chosen):
        base = "/resource_providers/" + root
        gen = direct.get(base).json()["generation"]
        what, value = (
            ("traits", ["CUSTOM_OPERATOR_%d" % rng.randrange(3)])
            if n % 2
            else ("aggregates", [str(uuid.UUID(int=rng.getrandbits(128), version=4))])
        )
        direct.put(base + "/" + what, json={what: value, "resource_provider_generation": gen})


def _claims(
    direct: httpx.Client,
    roots: list[str],
    rng: random.Random,
    agents: list[tuple[Clock, float, ResourceUpdater]],
) -> None:
    """A claim on a NUMA cell of 10% of the trees; 1% of the drivers
    change their VCPU total."""
    for root in rng.sample(roots, max(1, len(roots) // 10)):
        cells = direct.get("/resource_providers", params={"in_tree": root}).json()[
            "resource_providers"
        ]
        cell = rng.choice([c["uuid"] for c in cells if c["parent_provider_uuid"]])
        direct.put(
            "/allocations/%s" % uuid.UUID(int=rng.getrandbits(128), version=4),
            json={
                "allocations": {cell: {"resources": {"VCPU": 1}}},
                "project_id": "p",
                "user_id": "u",
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            },
        )
    for _, _, updater in rng.sample(agents, max(1, len(agents) // 100)):
        driver = updater.driver.driver  # type: ignore[attr-defined]
        driver.vcpus += 2 if driver.vcpus < 40 else -2


def _feed_mode(args: Any, feed: bool) -> dict[str, Any]:
    """Every scenario in one mode, on a fresh database."""
    shm = Path("/dev/shm")
    with tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else None) as tmp:
        engine = create_engine("sqlite:///%s/feed.sqlite" % tmp)
        setup.prepare(engine)
        conf = berth_conf.load([])
        results: dict[str, Any] = {}
        with PlacementDirect(conf, Database(engine), latest_microversion=True) as direct:
            for n in range(3):
                direct.put("/traits/CUSTOM_OPERATOR_%d" % n)
            transport = Counting(direct._transport)
            http = httpx.Client(
                transport=transport, base_url=direct.base_url, headers=direct.headers
            )
            agents, roots = _fleet(http, direct, args, feed)
            rng = random.Random(args.seed)
            rounds = 0
            for scenario, length in (
                ("first", 1),
                ("idle", args.minutes),
                ("operator", args.minutes),
                ("claims", args.minutes),
            ):
                transport.reset()
                statuses: dict[str, int] = {}
                for _ in range(length):
                    rounds += 1
                    if scenario == "operator":
                        _operator(direct, roots, rng)
                    elif scenario == "claims":
                        _claims(direct, roots, rng, agents)
                    for clock, offset, updater in agents:
                        clock.now = rounds * args.interval + offset
                        for result in updater.update_all():
                            statuses[result.status] = statuses.get(result.status, 0) + 1
                agent_rounds = len(agents) * length
                results[scenario] = {
                    "statuses": statuses,
                    "requests": transport.requests,
                    "writes": transport.writes,
                    "requests_per_agent_round": round(transport.requests / agent_rounds, 4),
                    "server_cpu_ms_per_agent_round": round(1000 * transport.cpu / agent_rounds, 4),
                }
                print("feed" if feed else "interval", scenario, results[scenario], flush=True)
        engine.dispose()
    return results


def compare_feed(args: Any) -> None:
    """``--compare-feed``: the per-tree check against the change feed."""
    results = {"interval": _feed_mode(args, False), "feed": _feed_mode(args, True)}
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    path = out / ("agents-feed-%s.json" % time.strftime("%Y%m%d-%H%M%S"))
    path.write_text(json.dumps({"args": vars(args), **results}, indent=2))
    print(
        "\n| scenario | requests / agent-round, per-tree check | with the "
        "feed | server CPU ms / agent-round, per-tree check | with the "
        "feed |"
    )
    print("|---|---|---|---|---|")
    for scenario in results["feed"]:
        a, b = results["interval"][scenario], results["feed"][scenario]
        print(
            "| %s | %.3f | %.3f | %.3f | %.3f |"
            % (
                scenario,
                a["requests_per_agent_round"],
                b["requests_per_agent_round"],
                a["server_cpu_ms_per_agent_round"],
                b["server_cpu_ms_per_agent_round"],
            )
        )
    print("results:", path, file=sys.stderr)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument(
        "--minutes",
        type=int,
        default=10,
        help="simulated minutes per phase (default 10: two association refreshes)",
    )
    parser.add_argument(
        "--uncached-agents", type=int, default=500, help="sample size of the uncached comparison"
    )
    parser.add_argument(
        "--db-url", help="default: a fresh SQLite file (in /dev/shm where there is one)"
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--compare-feed",
        action="store_true",
        help="compare the change feed with the per-tree check (see the module docstring) instead",
    )
    parser.add_argument(
        "--interval",
        type=float,
        default=60.0,
        help="with --compare-feed: the association refresh interval (default 60 s)",
    )
    parser.add_argument(
        "--trees-per-agent",
        type=int,
        default=1,
        help="with --compare-feed: compute trees each "
        "agent manages (1: Nova's libvirt; more: Ironic)",
    )
    args = parser.parse_args()
    if args.compare_feed:
        compare_feed(args)
        return

    shm = Path("/dev/shm")
    tmp = tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else None)
    url = args.db_url or "sqlite:///%s/agents.sqlite" % tmp.name
    engine = create_engine(url)
    setup.prepare(engine)
    conf = berth_conf.load([])
    with PlacementDirect(conf, Database(engine)) as direct:
        transport = Counting(direct._transport)
        http = httpx.Client(transport=transport, base_url=direct.base_url, headers=direct.headers)
        rng = random.Random(args.seed)
        agents = [Agent(http, i, args.agents, rng.random() < 0.3) for i in range(args.agents)]
        m = args.minutes
        results = {"build": _phase(transport, agents, range(0, 1))}
        print("build", results["build"], flush=True)
        results["idle"] = _phase(transport, agents, range(1, m + 1))
        print("idle", results["idle"], flush=True)
        results["change_1pct"] = _phase(transport, agents, range(m + 1, 2 * m + 1), rng)
        print("change_1pct", results["change_1pct"], flush=True)
        sample = agents[: args.uncached_agents]
        results["uncached_idle"] = _phase(
            transport, sample, range(2 * m + 1, 3 * m + 1), forget=True
        )
        print("uncached_idle", results["uncached_idle"], flush=True)
    engine.dispose()
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    path = out / ("agents-%s.json" % time.strftime("%Y%m%d-%H%M%S"))
    path.write_text(json.dumps({"args": vars(args), **results}, indent=2))
    print(
        "\n| phase | agents | requests / agent-minute | writes / "
        "agent-minute | server CPU ms / agent-minute |"
    )
    print("|---|---|---|---|---|")
    for name, r in results.items():
        if name == "build":
            continue
        print(
            "| %s | %d | %.4f | %.4f | %.4f |"
            % (
                name,
                r["agents"],
                r["requests_per_agent_minute"],
                r["writes_per_agent_minute"],
                r["server_cpu_ms_per_agent_minute"],
            )
        )
    print("results:", path, file=sys.stderr)


if __name__ == "__main__":
    main()
