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
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
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

    def update_provider_tree(self, provider_tree: ProviderTree,
                             nodename: str, allocations: Any = None) -> None:
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
            provider_tree.update_inventory(name, {
                "VCPU": {"total": self.vcpus // 2},
                "MEMORY_MB": {"total": 32768}})
            provider_tree.update_traits(name, ["HW_NUMA_ROOT"])


class Agent:
    def __init__(self, http: httpx.Client, index: int, count: int,
                 numa: bool) -> None:
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


def _phase(transport: Counting, agents: list[Agent], minutes: range,
           rng: random.Random | None = None, forget: bool = False
           ) -> dict[str, Any]:
    transport.reset()
    started = time.monotonic()
    statuses: dict[str, int] = {}
    for minute in minutes:
        changing = (set(rng.sample(range(len(agents)),
                                   max(1, len(agents) // 100)))
                    if rng is not None else set())
        for i, agent in enumerate(agents):
            if i in changing:
                agent.driver.vcpus += 2 if agent.driver.vcpus < 40 else -2
            if forget:
                agent.client.clear_provider_cache()
            status = agent.sync(minute)
            statuses[status] = statuses.get(status, 0) + 1
    agent_minutes = len(agents) * len(minutes)
    return {
        "agents": len(agents), "minutes": len(minutes),
        "statuses": statuses,
        "requests": transport.requests, "writes": transport.writes,
        "server_cpu_s": round(transport.cpu, 3),
        "wall_s": round(time.monotonic() - started, 1),
        "requests_per_agent_minute": round(
            transport.requests / agent_minutes, 4),
        "writes_per_agent_minute": round(transport.writes / agent_minutes,
                                         4),
        "server_cpu_ms_per_agent_minute": round(
            1000 * transport.cpu / agent_minutes, 4)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--minutes", type=int, default=10,
                        help="simulated minutes per phase (default 10: "
                        "two association refreshes)")
    parser.add_argument("--uncached-agents", type=int, default=500,
                        help="sample size of the uncached comparison")
    parser.add_argument("--db-url", help="default: a fresh SQLite file "
                        "(in /dev/shm where there is one)")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()

    shm = Path("/dev/shm")
    tmp = tempfile.TemporaryDirectory(dir=shm if shm.is_dir() else None)
    url = args.db_url or "sqlite:///%s/agents.sqlite" % tmp.name
    engine = create_engine(url)
    setup.prepare(engine)
    conf = berth_conf.load([])
    with PlacementDirect(conf, Database(engine)) as direct:
        transport = Counting(direct._transport)
        http = httpx.Client(transport=transport, base_url=direct.base_url,
                            headers=direct.headers)
        rng = random.Random(args.seed)
        agents = [Agent(http, i, args.agents, rng.random() < 0.3)
                  for i in range(args.agents)]
        m = args.minutes
        results = {"build": _phase(transport, agents, range(0, 1))}
        print("build", results["build"], flush=True)
        results["idle"] = _phase(transport, agents, range(1, m + 1))
        print("idle", results["idle"], flush=True)
        results["change_1pct"] = _phase(transport, agents,
                                        range(m + 1, 2 * m + 1), rng)
        print("change_1pct", results["change_1pct"], flush=True)
        sample = agents[:args.uncached_agents]
        results["uncached_idle"] = _phase(
            transport, sample, range(2 * m + 1, 3 * m + 1), forget=True)
        print("uncached_idle", results["uncached_idle"], flush=True)
    engine.dispose()
    out = Path(__file__).resolve().parent / "results"
    out.mkdir(exist_ok=True)
    path = out / ("agents-%s.json" % time.strftime("%Y%m%d-%H%M%S"))
    path.write_text(json.dumps({"args": vars(args), **results}, indent=2))
    print("\n| phase | agents | requests / agent-minute | writes / "
          "agent-minute | server CPU ms / agent-minute |")
    print("|---|---|---|---|---|")
    for name, r in results.items():
        if name == "build":
            continue
        print("| %s | %d | %.4f | %.4f | %.4f |" % (
            name, r["agents"], r["requests_per_agent_minute"],
            r["writes_per_agent_minute"],
            r["server_cpu_ms_per_agent_minute"]))
    print("results:", path, file=sys.stderr)


if __name__ == "__main__":
    main()
