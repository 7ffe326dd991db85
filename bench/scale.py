"""Berth and upstream Placement at 1,000, 10,000 and 50,000 hosts.

    .venv/bin/python bench/scale.py                       # everything (hours)
    .venv/bin/python bench/scale.py --hosts 1000 10000 --db sqlite --workers 2
    .venv/bin/python bench/scale.py --only berth --hosts 50000

For each database kind and world size, the world is written in bulk
(``bulk.py``) into Berth's schema, and copied into upstream's schema with
``berth db export`` for upstream, so both serve exactly the same world.
Then, for each implementation and worker count:

- **start-up**: seconds from starting the server to its first
  allocation-candidates answer (the world loaded), and per worker the
  resident memory (RSS), what of it is shared with other processes, and
  the proportional share (PSS, which sums to the true total);
- **queries** (for the first worker count, or each of
  ``--query-workers``; upstream beyond ``--upstream-query-max-hosts``
  hosts with the first only): server CPU per request and p50/p99 latency of each candidate
  query with and without ``limit=50``, provider listings filtered by
  ``resources`` and by ``required``, and ``/usages`` (steady, and the
  first after a claim by another project and after one by its own);
- **claims**, at every worker count: claims per second with 16
  concurrent schedulers (candidates with ``limit=5``, then a claim, again
  on a 409; each scheduler its own process, see ``run.claims``), and the
  server's CPU per claim (its process group's CPU over the run divided by
  the claims).

In-process, for Berth alone: the time to load the world whole, the
cost of a partial refresh after a claim and after an inventory change,
and the search's CPU for ``simple`` and ``nested`` with the candidate
memo empty (every tree searched), warm, and just after a claim on one
host (that tree searched again, the others taken from the memo).

Results go to ``bench/results/scale-<time>.json``, a Markdown table beside
it, and ``bench/results/scale-<time>.png`` (server CPU and latency against
world size, both implementations).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import sqlalchemy as sa

# bench/ for its sibling scripts, the repository root for support/.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bulk  # noqa: E402
import run  # noqa: E402
import scale_report  # noqa: E402
import worker_memory  # noqa: E402
import world as world_mod  # noqa: E402

from berth.api.microversion import wants  # noqa: E402
from berth.db import setup  # noqa: E402
from berth.db import tables as t  # noqa: E402
from berth.db.engine import Database, create_engine  # noqa: E402
from berth.domain.allocation_candidate import engine, load, parse, world_patch  # noqa: E402
from berth.domain.allocation_candidate.world import World  # noqa: E402
from support.servers import BERTH_VENV, ROOT, Server, ensure_upstream_venv  # noqa: E402

PG_ADMIN = os.environ.get(
    "BERTH_BENCH_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
Result = dict[str, Any]

LISTINGS = {
    "rp_resources": ("/resource_providers", run.BASE),
    "rp_required": ("/resource_providers", "required=HW_CPU_X86_AVX2"),
    "usages": ("/usages", "project_id=" + world_mod.uid("project-1")),
}

#: ``/usages`` for project-1 just after a claim: by another project (the
#: kept answer stays), and by project-1 itself (it is computed again).
AFTER_WRITE = {
    "usages_after_other_claim": world_mod.uid("project-2"),
    "usages_after_own_claim": world_mod.uid("project-1"),
}


def allocations_for(hosts: int) -> int:
    """Existing allocations: ten per host (100,000 at 10,000 hosts)."""
    return hosts * 10


class Databases:
    """Fresh databases of one kind, dropped at the end."""

    def __init__(self, kind: str, workdir: Path) -> None:
        self.kind = kind
        self.workdir = workdir
        workdir.mkdir(parents=True, exist_ok=True)
        self.made: list[str] = []

    def new(self, name: str) -> str:
        if self.kind == "sqlite":
            return "sqlite:///%s" % (self.workdir / ("%s.sqlite" % name))
        full = "berth_scale_%s_%d" % (name, os.getpid())
        admin = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(sa.text('DROP DATABASE IF EXISTS "%s"' % full))
            conn.execute(sa.text('CREATE DATABASE "%s"' % full))
        admin.dispose()
        self.made.append(full)
        return sa.engine.make_url(PG_ADMIN).set(database=full).render_as_string(hide_password=False)

    def drop(self) -> None:
        if not self.made:
            return
        admin = sa.create_engine(PG_ADMIN, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            for name in self.made:
                conn.execute(sa.text('DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % name))
        admin.dispose()


def build(url: str, hosts: int) -> Result:
    engine = create_engine(url)
    setup.prepare(engine)
    start = time.perf_counter()
    world = world_mod.plan(hosts, allocations=allocations_for(hosts))
    counts = Database(engine).run(lambda conn: bulk.write(conn, world))
    engine.dispose()
    return {"seconds": time.perf_counter() - start, **counts}


def export(berth_url: str, upstream_url: str, workdir: Path) -> str | None:
    """Copy the world into upstream's schema; None, or why it failed."""
    conf = workdir / "export.conf"
    conf.write_text("[placement_database]\nconnection = %s\n" % berth_url)
    done = subprocess.run(
        [
            str(BERTH_VENV / "bin/berth"),
            "db",
            "export",
            "--config-file",
            str(conf),
            "--to",
            upstream_url,
        ],
        capture_output=True,
        text=True,
    )
    if done.returncode:
        return (
            (done.stderr or done.stdout).strip().splitlines()[-1:][0]
            if (done.stderr or done.stdout).strip()
            else "exit %d" % done.returncode
        )
    return None


def inprocess(url: str) -> Result:
    """Whole load, and partial refreshes after a claim and after an
    inventory change, of the world Berth keeps in each worker."""
    db = Database(create_engine(url))
    loads = []
    for _ in range(3):
        start = time.perf_counter()
        world, _, _ = db.read(load.load_world)
        loads.append(time.perf_counter() - start)
    host = db.read(
        lambda conn: conn.scalar(
            sa.select(t.resource_providers.c.id).where(t.resource_providers.c.name == "cn-0001")
        )
    )

    def timed(fn: Any) -> float:
        times = []
        for _ in range(20):
            start = time.perf_counter()
            db.read(fn)
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1000

    usage_ms = timed(lambda conn: load.refresh_usage(conn, world, {host}))
    provider_ms = timed(lambda conn: load.refresh_providers(conn, world, {host}))
    db.dispose()
    return {
        "providers": len(world.providers),
        "load_s": statistics.median(loads),
        "refresh_after_claim_ms": usage_ms,
        "refresh_after_inventory_ms": provider_ms,
        **memo_effect(world, host),
    }


def memo_effect(world: World, host: int) -> Result:
    """The search alone (no body), in ms of CPU: with the memo empty
    (every tree searched), warm (the same query again), and just after a
    claim on one host (its tree searched again, the rest from the memo)."""
    out: Result = {}
    claimed = {host: {rc: n + 1 for rc, n in world.providers[host].used.items()}}
    for name in ("simple", "nested"):
        groups, wide = parse.parse_request(parse_qsl(run.QUERIES[name]), wants((1, 39)))
        specs = engine.group_specs(world, groups)
        assert specs is not None

        def cpu_ms(prepare: Any, w: World = world, s: Any = specs, wd: Any = wide) -> float:
            times = []
            for _ in range(5):
                target = prepare()
                start = time.process_time()
                engine.search(target, s, wd)
                times.append(time.process_time() - start)
            return statistics.median(times) * 1000

        def cold() -> World:
            world.memo.clear()
            return world

        out[name + "_search_cold_ms"] = cpu_ms(cold)
        out[name + "_search_warm_ms"] = cpu_ms(lambda: world)
        # Each round claims on the world the last round left warm.
        out[name + "_search_after_claim_ms"] = cpu_ms(
            lambda: world_patch.with_usage(world, claimed)
        )
    world.memo.clear()
    return out


def serve(
    kind: str, url: str, workdir: Path, workers: int, with_queries: bool, args: argparse.Namespace
) -> Result:
    out: Result = {}
    server = Server(kind, workdir / ("%s-%d" % (kind, workers)), workers, url)
    try:
        out["start"] = worker_memory.start(server, args.timeout)
        print("    %s %d workers: %s" % (kind, workers, out["start"]), flush=True)
        if "error" in out["start"]:
            return out
        if with_queries and not (args.claims_only or args.listings_only):
            for name, query in run.QUERIES.items():
                for label, q in ((name, query), (name + "+limit50", query + "&limit=50")):
                    out[label] = run.measure(
                        server, q, args.repeat, args.timeout, max_seconds=args.max_seconds
                    )
                    print("    %s %-22s %s" % (kind, label, out[label]), flush=True)
        if with_queries and not args.claims_only:
            for name, (path, query) in LISTINGS.items():
                out[name] = run.measure(
                    server,
                    query,
                    args.repeat,
                    args.timeout,
                    path=path,
                    max_seconds=args.max_seconds,
                )
                print("    %s %-22s %s" % (kind, name, out[name]), flush=True)
            path, query = LISTINGS["usages"]
            for name, project in AFTER_WRITE.items():
                out[name] = run.measure_after_write(
                    server, path, query, project, args.write_rounds, args.timeout
                )
                print("    %s %-22s %s" % (kind, name, out[name]), flush=True)
        if args.listings_only:
            return out
        claims = argparse.Namespace(
            claims=args.claims, clients=16, claims_seconds=args.claims_seconds
        )
        out["claims"] = run.claims(server, claims)
        print("    %s claims %s" % (kind, out["claims"]), flush=True)
        # After every query and claim: what the workers hold once they have
        # answered (for Berth, its candidate memo and encoded summaries).
        out["end"] = worker_memory.workers_memory(server)
    finally:
        server.stop()
    return out


def one_size(db_kind: str, hosts: int, workdir: Path, args: argparse.Namespace) -> Result:
    dbs = Databases(db_kind, workdir)
    out: Result = {}
    try:
        berth_url = dbs.new("berth_%d" % hosts)
        built = args.worlds / ("w%d.sqlite" % hosts) if args.worlds else None
        if db_kind == "sqlite" and built is not None and built.exists():
            # A copy: the prebuilt world is shared and never written.
            shutil.copy(built, sa.engine.make_url(berth_url).database or "")
            out["build"] = {"copied": str(built)}
        else:
            out["build"] = build(berth_url, hosts)
        print("  %s %d hosts: built %s" % (db_kind, hosts, out["build"]), flush=True)
        if not (args.claims_only or args.listings_only):
            out["inprocess"] = inprocess(berth_url)
            print("  in-process: %s" % out["inprocess"], flush=True)
        urls = {"berth": berth_url}
        if args.only != "berth" and hosts <= args.upstream_max_hosts:
            upstream_url = dbs.new("upstream_%d" % hosts)
            failed = export(berth_url, upstream_url, workdir)
            if failed:
                out["upstream_error"] = "export failed: %s" % failed
                print("  upstream skipped: %s" % out["upstream_error"], flush=True)
            else:
                # Upstream's venv has psycopg2, not psycopg 3.
                urls["upstream"] = upstream_url.replace(
                    "postgresql+psycopg://", "postgresql+psycopg2://", 1
                )
        for kind, url in urls.items():
            if args.only and kind != args.only:
                continue
            for n, workers in enumerate(args.workers):
                queries = workers in args.query_workers if args.query_workers else n == 0
                if kind == "upstream" and hosts > args.upstream_query_max_hosts:
                    queries = queries and n == 0
                out["%s/%d" % (kind, workers)] = serve(kind, url, workdir, workers, queries, args)
    finally:
        dbs.drop()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, nargs="+", default=[1000, 10000, 50000])
    ap.add_argument(
        "--db", nargs="+", default=["sqlite", "postgresql"], choices=["sqlite", "postgresql"]
    )
    ap.add_argument("--workers", type=int, nargs="+", default=[2, 8])
    ap.add_argument("--only", choices=["berth", "upstream"])
    ap.add_argument(
        "--upstream-max-hosts", type=int, default=50000, help="no upstream beyond this many hosts"
    )
    ap.add_argument(
        "--query-workers",
        type=int,
        nargs="*",
        help="measure the queries with these worker counts (default: the first of --workers only)",
    )
    ap.add_argument(
        "--upstream-query-max-hosts",
        type=int,
        default=10000,
        help="beyond this many hosts, upstream's queries only "
        "with the first worker count (each takes seconds)",
    )
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument(
        "--max-seconds", type=float, default=30, help="stop repeating a query after this long"
    )
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--claims", type=int, default=320)
    ap.add_argument(
        "--claims-seconds",
        type=float,
        default=120,
        help="no new claim after this long (a slow server)",
    )
    ap.add_argument(
        "--claims-only",
        action="store_true",
        help="only start-up and claims (no queries, no in-process)",
    )
    ap.add_argument(
        "--listings-only",
        action="store_true",
        help="only start-up, the listings and /usages (also "
        "just after claims); no candidates, claims or in-process",
    )
    ap.add_argument(
        "--write-rounds",
        type=int,
        default=40,
        help="claims, each followed by one /usages, per kind of write",
    )
    ap.add_argument(
        "--worlds",
        type=Path,
        help="a folder of prebuilt SQLite worlds (bulk.py), "
        "w<hosts>.sqlite, copied instead of building",
    )
    args = ap.parse_args()
    if args.only != "berth":
        ensure_upstream_venv()
    results: Result = {}
    with tempfile.TemporaryDirectory(prefix="berth-scale-") as tmp:
        for db_kind in args.db:
            results[db_kind] = {}
            for hosts in args.hosts:
                print("%s, %d hosts" % (db_kind, hosts), flush=True)
                results[db_kind][str(hosts)] = one_size(
                    db_kind, hosts, Path(tmp) / db_kind / str(hosts), args
                )
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (out / ("scale-%s.json" % stamp)).write_text(
        json.dumps({"args": vars(args), "results": results}, indent=2, default=str)
    )
    text = scale_report.table(results) + "\n\n" + scale_report.inprocess_table(results)
    (out / ("scale-%s.md" % stamp)).write_text(text + "\n")
    print(text)
    try:
        scale_report.plot(results, out / ("scale-%s.png" % stamp))
    except ImportError:
        print("matplotlib is not installed: no plot (pip install '.[bench]')")
    return 0


if __name__ == "__main__":
    sys.exit(main())
