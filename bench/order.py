"""What the order of allocation candidates costs (docs/allocation-candidates.md,
"Order"): the search of ``limit=50`` and ``limit=1000`` in each order
against the same search in ``uuid`` order, with a claim's usage refresh
before each search (so the cost of keeping the ranking sorted counts).

    .venv/bin/python bench/order.py                      # instructions
    .venv/bin/python bench/order.py --cpu --hosts 1000 10000 50000
    .venv/bin/python bench/order.py --cpu --steady       # after a warm-up

The world is built in memory (no database): ``hosts`` compute nodes with
VCPU, MEMORY_MB and DISK_GB, each used in part at random (seed 1). Each
step is one claim (``world_patch.with_usage`` of one host, as the cache's
usage refresh makes it: in place, as in ``berth serve``'s workers, or
with ``--copy`` copying, as in a threaded server) and one search
(``engine.plan`` and ``engine.search``, as ``find_candidates`` runs them,
the memo on). By default each case runs under valgrind's callgrind, which
counts only the ``steps`` measured (inside a ``functools.reduce``,
``--toggle-collect``), and the count divided by ``steps`` is reported:
instructions per step, start-up, the warm-up and the first search
(which ranks the world) excluded. ``--cpu`` reports instead the
median CPU time per step in this process (noisy on a shared machine).

``--warm N`` runs N steps before those measured (in both modes), and
``--steady`` those of ``steady_steps``: 100,000 tree visits, or five per
host where that is more (a scheduler asks the same flavour over and
over: after that many tree visits the memo holds what the order
visits, as far as its budget lets it, ``random``'s included, which
visits trees at random); without either, the figures are the cold
start's (one step before, the memo nearly empty).
"""

from __future__ import annotations

import argparse
import functools
import gc
import os
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from berth.domain.allocation_candidate import engine, world_patch  # noqa: E402
from berth.domain.allocation_candidate.order import SOURCE, make_order  # noqa: E402
from berth.domain.allocation_candidate.provider import Provider  # noqa: E402
from berth.domain.allocation_candidate.request import (  # noqa: E402
    RequestGroup,
    RequestWide,
    Settings,
)
from berth.domain.allocation_candidate.world import World  # noqa: E402
from berth.domain.capacity import Inventory  # noqa: E402

ORDERS = ("uuid", "spread", "pack", "random")
LIMITS = (50, 1000)
#: Tree visits of ``--steady``'s warm-up.
STEADY = 100_000
#: ... and at least this many per host, so that ``random``, which visits
#: trees at random, has visited 99% of them (e^-5 unvisited) once the
#: warm-up is over, whatever the size of the world.
PER_HOST = 5


def steady_steps(hosts: int, limit: int) -> int:
    """The steps of ``--steady``'s warm-up: ``max(STEADY, PER_HOST *
    hosts)`` tree visits, ``limit`` a step."""
    return max(1, max(STEADY, PER_HOST * hosts) // limit)


GROUPS = [RequestGroup("", {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 10})]


def build(hosts: int, seed: int = 1) -> World:
    """``hosts`` compute nodes, each used in part (a tenth of them empty)."""
    rng = random.Random(seed)
    providers = []
    for i in range(1, hosts + 1):
        totals = {
            "VCPU": rng.choice([32, 48, 64]),
            "MEMORY_MB": rng.choice([131072, 262144]),
            "DISK_GB": rng.choice([1000, 2000]),
        }
        share = 0.0 if rng.random() < 0.1 else rng.random() * 0.9
        providers.append(
            Provider(
                i,
                "%08x-0000-4000-8000-%012x" % (rng.getrandbits(32), i),
                i,
                None,
                {rc: Inventory(n) for rc, n in totals.items()},
                {rc: int(n * share) for rc, n in totals.items()},
                frozenset(),
                frozenset(),
            )
        )
    return World(providers)


def steps(
    world: World,
    order: str,
    limit: int,
    count: int,
    copy: bool = False,
    memo: int = 20_000,
    rng: random.Random | None = None,
) -> World:
    """``count`` steps (a claim's refresh, then a search); the world
    after them (``rng`` chooses the hosts claimed on)."""
    settings = Settings(order=make_order(order), memo=memo)
    wide = RequestWide(limit=limit)
    specs = engine.group_specs(world, GROUPS)
    assert specs is not None
    rng = rng or random.Random(2)
    roots = world.roots
    for _ in range(count):
        host = world.providers[rng.choice(roots)]
        world = world_patch.with_usage(
            world,
            {
                host.id: {
                    rc: min(inv.total, host.used.get(rc, 0) + 1)
                    for rc, inv in host.inventories.items()
                }
            },
            in_place=not copy,
        )
        found = engine.search(
            world, specs, wide, settings, anchors=engine.plan(world, GROUPS, settings.order)
        )
        assert len(found) == limit
    return world


def instructions(
    hosts: int, order: str, limit: int, count: int, copy: bool, memo: int, warm: int = 1
) -> float:
    """Instructions per step (valgrind), after ``warm`` steps: counted
    only inside the ``functools.reduce`` that runs the steps measured
    (``measured``), so that building the world and the warm-up cost
    nothing; they run uninstrumented, the instrumentation turned on
    just before the steps (``callgrind_control``)."""
    out = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            "--toggle-collect=*functools_reduce*",
            "--instr-atstart=no",
            sys.executable,
            __file__,
            "--one",
            str(hosts),
            order,
            str(limit),
            str(count),
            "--memo",
            str(memo),
            "--warm",
            str(warm),
        ]
        + (["--copy"] if copy else []),
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    for line in out.stderr.splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1]) / count
    raise RuntimeError(out.stderr[-500:])


def measured(
    hosts: int, order: str, limit: int, count: int, copy: bool, memo: int, warm: int
) -> None:
    """``warm`` steps, then ``count`` more inside one
    ``functools.reduce`` (what ``instructions`` counts)."""
    claims = random.Random(2)
    world = steps(build(hosts), order, limit, warm, copy, memo, claims)
    # Run without instrumentation until now (``--instr-atstart=no``: the
    # world and the warm-up run several times faster), then count.
    subprocess.run(
        ["callgrind_control", "--instr=on", str(os.getpid())], capture_output=True, check=True
    )
    functools.reduce(
        lambda w, _: steps(w, order, limit, 1, copy, memo, claims), range(count), world
    )


def cpu(
    hosts: int, order: str, limit: int, count: int, copy: bool, memo: int, warm: int = 1
) -> float:
    """Median CPU seconds per step, in this process, after ``warm``
    steps."""
    claims = random.Random(2)
    world = steps(build(hosts), order, limit, warm, copy, memo, claims)
    gc.freeze()  # as a server does with its world: no GC of it per step
    times = []
    for _ in range(count):
        start = time.process_time()
        world = steps(world, order, limit, 1, copy, memo, claims)
        times.append(time.process_time() - start)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hosts", type=int, nargs="+", default=[1000, 10000])
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--cpu", action="store_true")
    ap.add_argument("--orders", nargs="+", default=list(ORDERS))
    ap.add_argument(
        "--copy", action="store_true", help="refresh by copying (a threaded server's way)"
    )
    ap.add_argument(
        "--memo", type=int, default=20_000, help="[berth] candidate_memo (0: every tree searched)"
    )
    ap.add_argument(
        "--warm", type=int, default=1, help="steps before those measured (to fill the memo)"
    )
    ap.add_argument(
        "--steady",
        action="store_true",
        help="warm up for max(%d, %d x hosts) tree visits" % (STEADY, PER_HOST),
    )
    ap.add_argument("--limits", type=int, nargs="+", default=list(LIMITS))
    ap.add_argument("--one", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        hosts, order, limit, count = args.one
        # Ties drawn alike in every run.
        SOURCE.seed(3)
        warm = steady_steps(int(hosts), int(limit)) if args.steady else args.warm
        measured(int(hosts), order, int(limit), int(count), args.copy, args.memo, warm)
        return
    unit = "ms CPU" if args.cpu else "M instructions"
    print("%-7s %-6s %-6s %-7s %14s %8s" % ("hosts", "limit", "warm", "order", unit, "x uuid"))
    for hosts in args.hosts:
        for limit in args.limits:
            base = None
            warm = steady_steps(hosts, limit) if args.steady else args.warm
            for order in args.orders:
                cost = (
                    cpu(hosts, order, limit, args.steps, args.copy, args.memo, warm) * 1e3
                    if args.cpu
                    else instructions(hosts, order, limit, args.steps, args.copy, args.memo, warm)
                    / 1e6
                )
                base = cost if base is None else base
                print(
                    "%-7d %-6d %-6d %-7s %14.3f %8.3f"
                    % (hosts, limit, warm, order, cost, cost / base),
                    flush=True,
                )


if __name__ == "__main__":
    main()
