"""What hosts-first costs the candidate search, and what it buys.

With ``limit``, Berth gives each tree's first candidate before any tree's
second (``[berth] candidate_hosts_first``, docs/allocation-candidates.md,
"Every host at the limit"). This measures the search alone (in memory,
no database, no HTTP) in that strategy and tree by tree (depth-first),
on the same worlds in the same run, and counts the distinct hosts each
answer reaches:

- ``lone``: compute nodes of one provider each (most clouds), one group,
  at ``limit=50`` and ``limit=1000``;
- ``wide``: upstream's wide-tree reproducer, hosts with 8 PFs of 8 VFs
  each and 4 granular groups of one VF (``group_policy=none``), at
  ``limit=1000`` (Nova's ``max_placement_results``).

Each figure is the least process CPU time of ``--repeat`` searches, in
milliseconds, with the anchor memo on (the default, 20,000) or off
(``--memo 0``).

    .venv/bin/python bench/hosts_first.py [--hosts 5000] [--wide 50] [--memo 0]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from berth.domain.allocation_candidate.engine import search  # noqa: E402
from berth.domain.allocation_candidate.offers import GroupSpec  # noqa: E402
from berth.domain.allocation_candidate.request import (  # noqa: E402
    HOSTS_FIRST,
    RequestGroup,
    RequestWide,
    Settings,
)
from berth.domain.allocation_candidate.world import World  # noqa: E402
from support.candidate_worlds import group, prov  # noqa: E402

STRATEGIES = ("depth-first", HOSTS_FIRST)


def lone_world(hosts: int) -> World:
    return World([prov(i, inv={"VCPU": 8, "MEMORY_MB": 4096}) for i in range(1, hosts + 1)])


def wide_world(hosts: int, pfs: int = 8, vfs: int = 8) -> World:
    providers = []
    for n in range(1, hosts + 1):
        root = 1000 * n
        providers.append(prov(root, inv={"VCPU": 8}))
        providers += [
            prov(root + i, root=root, parent=root, inv={"SRIOV_NET_VF": vfs})
            for i in range(1, pfs + 1)
        ]
    return World(providers)


def measure(
    world: World, groups: list[RequestGroup], limit: int, strategy: str, memo: int, repeat: int
) -> tuple[float, int]:
    """The least CPU milliseconds of ``repeat`` searches, and the
    distinct trees the answer reaches."""
    specs = [GroupSpec(g) for g in groups]
    wide = RequestWide(limit=limit, group_policy="none")
    settings = Settings(strategy=strategy, memo=memo)
    best = float("inf")
    found = []
    for _ in range(repeat):
        start = time.process_time()
        found = search(world, specs, wide, settings)
        best = min(best, time.process_time() - start)
    return best * 1000, len({c.anchor for c in found})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hosts", type=int, default=5000, help="lone compute nodes")
    parser.add_argument("--wide", type=int, default=50, help="hosts of 8 PFs x 8 VFs")
    parser.add_argument("--memo", type=int, default=20_000, help="[berth] candidate_memo")
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    cases = [
        ("lone, %d hosts" % args.hosts, lone_world(args.hosts),
         [group(resources={"VCPU": 1, "MEMORY_MB": 512})], (50, 1000)),
        ("wide, %d hosts of 8 PFs x 8 VFs, 4 groups" % args.wide, wide_world(args.wide),
         [group(str(i), resources={"SRIOV_NET_VF": 1}) for i in range(1, 5)], (1000,)),
    ]  # fmt: skip
    print("| world | limit | depth-first ms (hosts) | hosts-first ms (hosts) | ratio |")
    print("| --- | --- | --- | --- | --- |")
    for name, world, groups, limits in cases:
        for limit in limits:
            (deep, deep_hosts), (first, first_hosts) = (
                measure(world, groups, limit, s, args.memo, args.repeat) for s in STRATEGIES
            )
            print(
                "| %s | %d | %.2f (%d) | %.2f (%d) | %.2fx |"
                % (name, limit, deep, deep_hosts, first, first_hosts, first / deep)
            )


if __name__ == "__main__":
    main()
