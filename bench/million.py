"""A million providers, in-process: what one worker pays (issue 39).

    .venv/bin/python bench/bulk.py --shape devices --hosts 50000 \\
        --allocations 500000 --url sqlite:////tmp/m1.sqlite
    .venv/bin/python bench/million.py --world sqlite:////tmp/m1.sqlite

On a copy of a ``bulk.py`` world (``claim_cycle.world_copy``: a SQLite
file copied, a PostgreSQL database made from it as a template; a MySQL
world is written to as it is: give a copy), two applications share
the database as two workers of one server do: a *writer* and a
*follower*, each with its own candidate cache, the follower's refreshed
in place and its garbage collector tuned (as a ``berth serve``
worker's: ``preload.after_fork``, ``memory.tune_gc``). It reports:

- **load**: the follower's first answer (its whole load of the world),
  and the process's resident memory grown by it, per provider;
- **candidates**: the Nova-shaped request (``world.DEVICE_REQUEST`` on a
  ``devices`` world; VCPU, memory and disk otherwise) with ``limit=1000``
  in every order (``/berth/allocation_candidates?order=``): process CPU
  per request, the least of ``--repeat`` after one unmeasured, and the
  distinct hosts (trees) among the candidates. The anchor memo keeps
  each tree's candidates for the next search (``[berth] candidate_memo``
  trees): with ``--memo 0`` every search is cold, which compares world
  sizes fairly (a repeated request on a small world is served from the
  memo, where at 50,000 hosts ``random`` draws trees it has not seen);
- **writes followed**: each structural write (a new host tree, a new
  child, a deleted provider, an inventory class added, traits, an
  aggregate, a sharing pool's traits) made through the writer, then
  the follower's next candidate request: the seconds its cache spent
  refreshing (its ``Refresh`` observer), what kind of refresh that was,
  and how many worlds it built anew (``World.__init__`` calls; 0 when
  the indexes were patched);
- **claims**: the claim cycle (candidates with ``limit=5``, then a
  ``PUT`` of the first for a new consumer), process CPU per cycle.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import uuid as uuidlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

sys.path.insert(0, str(Path(__file__).resolve().parent))
import worker_memory  # noqa: E402
import world as world_mod  # noqa: E402
from claim_cycle import world_copy  # noqa: E402
from wsgi_meter import Client, Meter, worker_app  # noqa: E402

from berth.domain.allocation_candidate import world as world_module  # noqa: E402
from berth.domain.allocation_candidate.cache import Refresh  # noqa: E402
from berth.serve.memory import tune_gc  # noqa: E402

ORDERS = ("uuid", "spread", "pack", "random")
PLAIN_REQUEST = "resources=VCPU:1,MEMORY_MB:1024,DISK_GB:10"

Result = dict[str, Any]


def _rss_mb() -> float:
    return worker_memory.memory(os.getpid())["rss_mb"]


class Counted:
    """Counts the worlds built anew (``World.__init__`` calls)."""

    def __init__(self) -> None:
        self.built = 0
        real = world_module.World.__init__

        def counting(world: Any, providers: Any) -> None:
            self.built += 1
            real(world, providers)

        world_module.World.__init__ = counting  # type: ignore[method-assign]


def _cpu_ms(call: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    """The least process CPU of ``repeat`` calls, after one unmeasured;
    and the last call's answer."""
    answer = call()
    times = []
    for _ in range(repeat):
        start = time.process_time()
        answer = call()
        times.append((time.process_time() - start) * 1000)
    return min(times), answer


def _hosts(answer: Any, roots: dict[str, str], hosts: set[str]) -> int:
    """How many distinct hosts (compute trees) the candidates are on (a
    sharing pool's tree is not one)."""
    found = set()
    for req in answer["allocation_requests"]:
        for rp in req["allocations"]:
            if roots[rp] in hosts:
                found.add(roots[rp])
    return len(found)


def measure(url: str, repeat: int, writes: int, memo: int | None, candidates_only: bool) -> Result:
    counted = Counted()
    refreshes: list[Refresh] = []
    out: Result = {}
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        roots = dict(
            conn.execute(
                sa.text(
                    "SELECT rp.uuid, r.uuid FROM resource_providers rp "
                    "JOIN resource_providers r ON r.id = rp.root_provider_id"
                )
            ).all()
        )
        devices = bool(
            conn.scalar(
                sa.text(
                    "SELECT count(*) FROM inventories i JOIN resource_classes rc "
                    "ON rc.id = i.resource_class_id WHERE rc.name = 'VGPU'"
                )
            )
        )
        hosts = (
            conn.execute(
                sa.text(
                    "SELECT uuid FROM resource_providers WHERE parent_provider_id IS NULL "
                    "AND name LIKE 'cn-%' ORDER BY uuid"
                )
            )
            .scalars()
            .all()
        )
        pool = conn.scalar(sa.text("SELECT uuid FROM resource_providers WHERE name = 'pool-0'"))
    engine.dispose()
    out["providers"] = len(roots)
    meter = Meter()
    writer = Client(worker_app(url), meter)
    # The follower's garbage collector as a server worker's: the world
    # frozen out of its view after the whole load.
    follower = Client(worker_app(url, [tune_gc(), refreshes.append], memo), meter)
    query = world_mod.DEVICE_REQUEST if devices else PLAIN_REQUEST
    rss = _rss_mb()
    start = time.perf_counter()
    follower("GET", "/allocation_candidates?%s&limit=1" % query)
    out["first_answer_s"] = time.perf_counter() - start
    grown = _rss_mb() - rss
    out["rss_grown_mb"] = grown
    out["bytes_per_provider"] = grown * 1024 * 1024 / len(roots)
    out["query"] = query
    for order in ORDERS:
        ms, answer = _cpu_ms(
            lambda o=order: follower(
                "GET", "/berth/allocation_candidates?%s&limit=1000&order=%s" % (query, o)
            ),
            repeat,
        )
        out["limit1000_%s_ms" % order] = ms
        out["limit1000_%s_hosts" % order] = _hosts(answer, roots, set(hosts))
        out["limit1000_%s_candidates" % order] = len(answer["allocation_requests"])
    if candidates_only:
        return out
    out["writes"] = _follow_writes(writer, follower, refreshes, counted, hosts, pool, query, writes)
    out["claim_cycle_ms"] = _claims(follower, query, repeat)
    return out


def _follow_writes(
    writer: Client,
    follower: Client,
    refreshes: list[Refresh],
    counted: Counted,
    hosts: list[str],
    pool: str | None,
    query: str,
    rounds: int,
) -> dict[str, Result]:
    """Each structural write through ``writer``, then ``follower``'s next
    request: its refresh's seconds and kind, and the worlds built."""
    # Names of this run's own (a PostgreSQL world is written to as it is,
    # and may have been measured before).
    tag = uuidlib.uuid4().hex[:8].upper()

    def gen(rp: str) -> int:
        return int(writer("GET", "/resource_providers/%s" % rp)["generation"])

    def new_tree(n: int) -> None:
        rp = str(uuidlib.uuid4())
        writer("POST", "/resource_providers", {"name": "new-host-%s-%d" % (tag, n), "uuid": rp})
        writer(
            "PUT",
            "/resource_providers/%s/inventories" % rp,
            {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}},
        )

    def new_child(n: int) -> None:
        writer(
            "POST",
            "/resource_providers",
            {"name": "new-child-%s-%d" % (tag, n), "parent_provider_uuid": hosts[n]},
        )

    def delete(n: int) -> None:
        rp = str(uuidlib.uuid4())
        writer(
            "POST",
            "/resource_providers",
            {"name": "doomed-%s-%d" % (tag, n), "uuid": rp},
            expect=200,
        )
        follower("GET", "/allocation_candidates?%s&limit=5" % query)
        refreshes.clear()
        writer("DELETE", "/resource_providers/%s" % rp, expect=204)

    def inventory(n: int) -> None:
        rp = hosts[-1 - n]
        have = writer("GET", "/resource_providers/%s/inventories" % rp)
        invs = have["inventories"]
        invs["CUSTOM_MILLION_%s_%d" % (tag, n)] = {"total": 1}
        writer(
            "PUT",
            "/resource_providers/%s/inventories" % rp,
            {
                "resource_provider_generation": have["resource_provider_generation"],
                "inventories": invs,
            },
            expect=200,
        )

    def labels(rp: str, part: str, more: list[str]) -> None:
        """``rp``'s traits or aggregates (``part``) with ``more`` too."""
        have = writer("GET", "/resource_providers/%s/%s" % (rp, part))
        writer(
            "PUT",
            "/resource_providers/%s/%s" % (rp, part),
            {
                "resource_provider_generation": have["resource_provider_generation"],
                part: have[part] + more,
            },
        )

    def traits(n: int) -> None:
        labels(hosts[-1 - n], "traits", ["CUSTOM_MILLION_%s_T%d" % (tag, n)])

    def aggregate(n: int) -> None:
        labels(hosts[-1 - n], "aggregates", [str(uuidlib.uuid4())])

    def pool_traits(n: int) -> None:
        assert pool is not None
        have = writer("GET", "/resource_providers/%s/traits" % pool)
        writer(
            "PUT",
            "/resource_providers/%s/traits" % pool,
            {
                "resource_provider_generation": have["resource_provider_generation"],
                "traits": sorted(set(have["traits"]) ^ {"CUSTOM_MILLION_%s_POOL" % tag}),
            },
        )

    kinds: dict[str, Callable[[int], None]] = {
        "new host tree": new_tree,
        "new child": new_child,
        "deleted provider": delete,
        "inventory class added": inventory,
        "traits": traits,
        "aggregate": aggregate,
    }
    if pool is not None:
        kinds["sharing pool's traits"] = pool_traits
    for n in range(2):
        writer("PUT", "/resource_classes/CUSTOM_MILLION_%s_%d" % (tag, n), expect=201)
    for n in range(rounds):
        writer("PUT", "/traits/CUSTOM_MILLION_%s_T%d" % (tag, n), expect=201)
    writer("PUT", "/traits/CUSTOM_MILLION_%s_POOL" % tag, expect=201)
    results: dict[str, Result] = {}
    for name, write in kinds.items():
        seconds, built, kind = [], 0, set()
        for n in range(rounds):
            if name == "inventory class added" and n >= 2:
                break
            follower("GET", "/allocation_candidates?%s&limit=5" % query)
            refreshes.clear()
            write(n)
            before = counted.built
            follower("GET", "/allocation_candidates?%s&limit=5" % query)
            built += counted.built - before
            seconds += [r.seconds for r in refreshes]
            kind |= {r.kind for r in refreshes}
        results[name] = {
            "refresh_ms_median": statistics.median(seconds) * 1000,
            "refresh_ms_max": max(seconds) * 1000,
            "kinds": sorted(kind),
            "worlds_built": built,
            "writes": len(seconds),
        }
    return results


def _claims(client: Client, query: str, repeat: int) -> float:
    """Process CPU per claim cycle: candidates with ``limit=5``, then the
    first claimed for a new consumer."""
    project, user = str(uuidlib.uuid4()), str(uuidlib.uuid4())

    def cycle() -> None:
        answer = client("GET", "/allocation_candidates?%s&limit=5" % query)
        first = answer["allocation_requests"][0]["allocations"]
        client(
            "PUT",
            "/allocations/%s" % uuidlib.uuid4(),
            {
                "allocations": first,
                "project_id": project,
                "user_id": user,
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            },
            expect=204,
        )

    for _ in range(20):
        cycle()
    times = []
    for _ in range(max(repeat, 50)):
        start = time.process_time()
        cycle()
        times.append((time.process_time() - start) * 1000)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", required=True, help="a bulk.py world's URL")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--writes", type=int, default=5, help="writes of each kind")
    ap.add_argument("--json", help="write the results here too")
    ap.add_argument(
        "--memo",
        type=int,
        help="[berth] candidate_memo for the follower (0: every search cold; default: Berth's)",
    )
    ap.add_argument("--candidates-only", action="store_true", help="no writes, no claims")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp, world_copy(args.world, Path(tmp)) as url:
        result = measure(url, args.repeat, args.writes, args.memo, args.candidates_only)
    text = json.dumps(result, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
