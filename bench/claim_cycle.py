"""A claim through ``berth serve``: one scheduler's claim cycle, and 16
schedulers racing (issue 24, items 2 and 3).

    PYTHONPATH=$PWD/src .venv/bin/python bench/bulk.py --hosts 1000 \\
        --allocations 10000 --url sqlite:////tmp/w1000.sqlite
    PYTHONPATH=$PWD/src .venv/bin/python bench/claim_cycle.py \\
        --world sqlite:////tmp/w1000.sqlite --workers 2

``--world`` is a ``bulk.py`` world: a SQLite file or a PostgreSQL
database (each copied for each run: ``CREATE DATABASE <world>_run
TEMPLATE <world>``, dropped after), or a MySQL database (used as it is:
give a fresh copy). Each run starts its own server.

* cycle: one client, ``--cycles`` claim cycles after 30 to warm up: a
  ``GET /allocation_candidates?...&limit=5``, then a ``PUT`` of its first
  candidate for a new consumer (as Nova's scheduler does), one project
  and user for all, as in a cloud of few tenants. Server CPU per cycle
  (its whole process group) and wall time per cycle.
* race: ``--schedulers`` processes (``run.claims``: a plain ``run.Wire``,
  each claim retried on a 409), ``--claims`` claims after 200 to warm
  up: claims per second, 409s, and where the two cores went per claim
  (``Split``): the server's process group, the schedulers, on
  PostgreSQL the backends serving the run's database and PostgreSQL's
  own processes (writer, checkpointer, autovacuum...), the machine's
  busy time (``/proc/stat``) and what it could give (cores x wall time),
  and what the machine spent on anything else meanwhile; then the
  (provider, class) pairs whose allocations pass their capacity (0), and
  the pairs whose usage, as the workers report it in the candidates'
  provider summaries, is not the sum of their allocations (0, of how
  many compared).

``--server uwsgi`` serves the same through the uWSGI deployment
(``deploy/uwsgi/berth.ini`` as written but for its paths, port and
``--workers`` processes; uWSGI installed in the venv by ``bash
.ci/deploy.sh``) instead of ``berth serve``.

``--no-sync`` runs SQLite with ``sqlite_synchronous = False`` (no fsync
per commit: the write lock is then held for the transaction's CPU only).
Set ``PYTHONPATH`` to another checkout's ``src`` to measure that code.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa

# bench/ for its sibling scripts, the repository root for support/.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # noqa: E402

from support.servers import TICKS, Server  # noqa: E402

QUERY = "resources=VCPU:1,MEMORY_MB:512&limit=5"
PROJECT, USER = "p" * 32, "u" * 32


def cycles(server: Server, count: int) -> dict[str, float]:
    """Server CPU and wall time per claim cycle, one client."""
    conn = run.Wire("127.0.0.1", server.port)

    def cycle() -> None:
        status = run.claim_attempt(conn, QUERY, str(uuid.uuid4()), (PROJECT, USER))
        if status != 204:
            raise RuntimeError("claim cycle ended with %d" % status)

    for _ in range(30):
        cycle()
    cpu, wall = server.cpu_seconds(), time.perf_counter()
    for _ in range(count):
        cycle()
    return {
        "server_cpu_ms_per_cycle": (server.cpu_seconds() - cpu) * 1e3 / count,
        "wall_ms_per_cycle": (time.perf_counter() - wall) * 1e3 / count,
    }


def _cpu(pid: int) -> float | None:
    """User+system CPU seconds of process ``pid`` (None: gone)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _machine() -> tuple[float, float]:
    """CPU seconds the machine has been busy, and in all (every core)."""
    with open("/proc/stat") as f:
        ticks = [int(n) for n in f.readline().split()[1:9]]
    idle = ticks[3] + ticks[4]  # idle, iowait
    return (sum(ticks) - idle) / TICKS, sum(ticks) / TICKS


class Split:
    """Where the machine's cores go while a race runs (``run.claims``'
    ``probe``): called as it starts, it returns the callable that gives,
    as it ends, the CPU seconds of the PostgreSQL backends connected to
    the run's database (``pg_stat_activity``, each backend's own
    ``/proc/<pid>/stat``; one that appeared meanwhile counts whole, what
    one gone before the end spent is lost: the servers' pooled
    connections stay), of PostgreSQL's
    other processes (postmaster, writers, autovacuum: shared with anyone
    else using the server), the machine's busy time and its capacity
    (all cores over the same wall time)."""

    def __init__(self, url: str | None) -> None:
        self.engine = None
        self.database = None
        if url is not None and url.startswith("postgresql"):
            parsed = sa.engine.make_url(url)
            self.database = parsed.database
            self.engine = sa.create_engine(
                parsed.set(database="postgres"),
                poolclass=sa.pool.NullPool,
                isolation_level="AUTOCOMMIT",
            )

    def _pids(self) -> tuple[set[int], set[int]]:
        """The run database's backends, and PostgreSQL's own processes."""
        if self.engine is None:
            return set(), set()
        with self.engine.connect() as conn:
            rows = conn.execute(
                sa.text(
                    "SELECT pid, datname, backend_type FROM pg_stat_activity "
                    "WHERE pid <> pg_backend_pid()"
                )
            ).all()
        backends = {
            pid for pid, db, kind in rows if db == self.database and kind == "client backend"
        }
        own = {pid for pid, db, kind in rows if kind != "client backend"}
        for pid in list(own)[:1]:  # their parent: the postmaster
            with open("/proc/%d/stat" % pid) as f:
                stat = f.read()
            own.add(int(stat[stat.rindex(")") + 2 :].split()[1]))
        return backends, own

    def __call__(self) -> Callable[[], dict[str, float]]:
        backends, own = self._pids()
        before = {pid: _cpu(pid) or 0.0 for pid in backends | own}
        busy, total = _machine()

        def finish() -> dict[str, float]:
            busy_now, total_now = _machine()
            backends_now, own_now = self._pids()

            def spent(pids: set[int]) -> float:
                return sum(
                    (_cpu(pid) or before.get(pid, 0.0)) - before.get(pid, 0.0) for pid in pids
                )

            found = {"machine_busy_cpu": busy_now - busy, "machine_capacity_cpu": total_now - total}
            if self.engine is not None:
                found.update(
                    pg_backends_cpu=spent(backends | backends_now), pg_own_cpu=spent(own | own_now)
                )
            return found

        return finish

    def dispose(self) -> None:
        if self.engine is not None:
            self.engine.dispose()


def split_summary(found: dict[str, float | int | str]) -> dict[str, float]:
    """The race's split of the cores per claim, with what the machine
    spent on other work meanwhile and the share of its capacity used."""

    def ms(key: str) -> float:
        return float(found.get(key, 0.0))

    ours = (
        ms("server_cpu_ms_per_claim")
        + ms("client_cpu_ms_per_claim")
        + ms("pg_backends_cpu_ms_per_claim")
        + ms("pg_own_cpu_ms_per_claim")
    )
    busy = ms("machine_busy_cpu_ms_per_claim")
    capacity = ms("machine_capacity_cpu_ms_per_claim")
    return {
        "run_cpu_ms_per_claim": ours,
        "other_cpu_ms_per_claim": busy - ours,
        "machine_busy_share": busy / capacity if capacity else 0.0,
    }


#: (provider, class) pairs whose allocations pass their capacity.
OVER = """SELECT count(*) FROM (
    SELECT i.resource_provider_id FROM inventories i JOIN allocations a
    ON a.resource_provider_id = i.resource_provider_id
    AND a.resource_class_id = i.resource_class_id
    GROUP BY i.resource_provider_id, i.resource_class_id, i.total,
             i.reserved, i.allocation_ratio
    HAVING sum(a.used) > (i.total - i.reserved) * i.allocation_ratio) o"""


def _rows(url: str, sql: str) -> list[Any]:
    """The rows ``sql`` gives on the database at ``url`` (a connection of
    its own, closed after)."""
    engine = sa.create_engine(url, poolclass=sa.pool.NullPool)
    try:
        with engine.connect() as conn:
            return list(conn.exec_driver_sql(sql).all())
    finally:
        engine.dispose()


def over_allocated(url: str) -> int:
    """How many (provider, class) pairs the world over-allocates."""
    return int(_rows(url, OVER)[0][0] or 0)


#: Each (provider, class) pair's usage as its allocations add up.
USED = """SELECT p.uuid, c.name, sum(a.used) FROM allocations a
    JOIN resource_providers p ON p.id = a.resource_provider_id
    JOIN resource_classes c ON c.id = a.resource_class_id
    GROUP BY p.uuid, c.name"""


def usage_mismatches(server: Server, url: str, asks: int = 6) -> tuple[int, int]:
    """The workers' usages against the allocations' sums, after a race.

    ``asks`` new connections (each accepted by whichever worker takes it,
    so every worker answers some) each ask for every candidate of
    ``QUERY``'s resources, no limit; each provider summary's ``used`` of
    each class must be what the database's allocations add up to (0 where
    none). Returns (pairs that differ, pairs compared)."""
    sums = {(p, c): int(n) for p, c, n in _rows(url, USED)}
    differ = compared = 0
    for _ in range(asks):
        conn = run.Wire("127.0.0.1", server.port)
        try:
            status, body = conn.call("GET", "/allocation_candidates?" + QUERY.split("&limit=")[0])
        finally:
            conn.close()
        if status != 200:
            raise RuntimeError("candidates after the race answered %d" % status)
        summaries = orjson.loads(body)["provider_summaries"]
        for provider, summary in summaries.items():
            for rc, amounts in summary["resources"].items():
                compared += 1
                differ += amounts["used"] != sums.get((provider, rc), 0)
    return differ, compared


@contextmanager
def world_copy(url: str, tmp: Path) -> Iterator[str]:
    """A copy of the world at ``url`` for one run: a SQLite file in
    ``tmp``, or a PostgreSQL database made from it as a template (and
    dropped after); a MySQL world as it is."""
    if url.startswith("sqlite:///"):
        copy = tmp / "world.sqlite"
        shutil.copy(url[len("sqlite:///") :], copy)
        yield "sqlite:///%s" % copy
        return
    if not url.startswith("postgresql"):
        yield url
        return
    parsed = sa.engine.make_url(url)
    name = "%s_run%d" % (parsed.database, os.getpid())
    admin = sa.create_engine(
        parsed.set(database="postgres"), poolclass=sa.pool.NullPool, isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as conn:
        conn.exec_driver_sql('CREATE DATABASE "%s" TEMPLATE "%s"' % (name, parsed.database))
    try:
        yield parsed.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as conn:
            conn.exec_driver_sql('DROP DATABASE IF EXISTS "%s" WITH (FORCE)' % name)
        admin.dispose()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", required=True, help="a bulk.py world's URL")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cycles", type=int, default=800)
    ap.add_argument("--schedulers", type=int, default=16)
    ap.add_argument("--claims", type=int, default=1600)
    ap.add_argument("--no-sync", action="store_true")
    ap.add_argument(
        "--server",
        choices=["serve", "uwsgi"],
        default="serve",
        help="berth serve (gunicorn), or deploy/uwsgi/berth.ini",
    )
    ap.add_argument("--only", choices=["cycle", "race"])
    args = ap.parse_args()
    sections: dict[str, dict[str, object]] = (
        {"placement_database": {"sqlite_synchronous": False}} if args.no_sync else {}
    )
    for part in ("cycle", "race"):
        if args.only not in (None, part):
            continue
        workers = 1 if part == "cycle" else args.workers
        with (
            tempfile.TemporaryDirectory() as tmp,
            world_copy(args.world, Path(tmp)) as url,
            Server(
                "berth" if args.server == "serve" else "berth-uwsgi",
                Path(tmp),
                workers=workers,
                db_url=url,
                sections=sections,
            ) as server,
        ):
            if part == "cycle":
                found = cycles(server, args.cycles)
            else:
                run.claims(server, argparse.Namespace(claims=200, clients=args.schedulers))
                split = Split(url)
                try:
                    found = run.claims(
                        server,
                        argparse.Namespace(
                            claims=args.claims, clients=args.schedulers, probe=split
                        ),
                    )
                finally:
                    split.dispose()
                found.update(split_summary(found))
                found["over_allocated"] = over_allocated(url)
                differ, compared = usage_mismatches(server, url)
                found["usage_mismatches"] = differ
                found["usage_pairs_compared"] = compared
            print(
                json.dumps(
                    {
                        "part": part,
                        "server": args.server,
                        "workers": workers,
                        "no_sync": args.no_sync,
                        **{k: round(v, 2) if isinstance(v, float) else v for k, v in found.items()},
                    }
                )
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
