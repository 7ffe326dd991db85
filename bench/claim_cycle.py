"""A claim through ``berth serve``: one scheduler's claim cycle, and 16
schedulers racing (issue 24, items 2 and 3).

    PYTHONPATH=$PWD/src .venv/bin/python bench/bulk.py --hosts 1000 \\
        --allocations 10000 --url sqlite:////tmp/w1000.sqlite
    PYTHONPATH=$PWD/src .venv/bin/python bench/claim_cycle.py \\
        --world sqlite:////tmp/w1000.sqlite --workers 2

``--world`` is a ``bulk.py`` world: a SQLite file (copied for each run)
or a PostgreSQL/MySQL database (used as it is: give a fresh copy, e.g.
``CREATE DATABASE run TEMPLATE world``). Each run starts its own server.

* cycle: one client, ``--cycles`` claim cycles after 30 to warm up: a
  ``GET /allocation_candidates?...&limit=5``, then a ``PUT`` of its first
  candidate for a new consumer (as Nova's scheduler does), one project
  and user for all, as in a cloud of few tenants. Server CPU per cycle
  (its whole process group) and wall time per cycle.
* race: ``--schedulers`` processes (``run.claims``: plain ``http.client``,
  each claim retried on a 409), ``--claims`` claims after 200 to warm
  up: claims per second, 409s, server and scheduler CPU per claim.

``--no-sync`` runs SQLite with ``sqlite_synchronous = False`` (no fsync
per commit: the write lock is then held for the transaction's CPU only).
Set ``PYTHONPATH`` to another checkout's ``src`` to measure that code.
"""

from __future__ import annotations

import argparse
import http.client
import json
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path

# bench/ for its sibling scripts, the repository root for support/.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # noqa: E402

from support.servers import Server  # noqa: E402

QUERY = "resources=VCPU:1,MEMORY_MB:512&limit=5"
PROJECT, USER = "p" * 32, "u" * 32


def cycles(server: Server, count: int) -> dict[str, float]:
    """Server CPU and wall time per claim cycle, one client."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port)

    def cycle() -> None:
        status = run.claim_attempt(conn, QUERY, str(uuid.uuid4()),
                                   (PROJECT, USER))
        if status != 204:
            raise RuntimeError("claim cycle ended with %d" % status)

    for _ in range(30):
        cycle()
    cpu, wall = server.cpu_seconds(), time.perf_counter()
    for _ in range(count):
        cycle()
    return {"server_cpu_ms_per_cycle": (server.cpu_seconds() - cpu) * 1e3 / count,
            "wall_ms_per_cycle": (time.perf_counter() - wall) * 1e3 / count}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--world", required=True, help="a bulk.py world's URL")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--cycles", type=int, default=800)
    ap.add_argument("--schedulers", type=int, default=16)
    ap.add_argument("--claims", type=int, default=1600)
    ap.add_argument("--no-sync", action="store_true")
    ap.add_argument("--only", choices=["cycle", "race"])
    args = ap.parse_args()
    sections: dict[str, dict[str, object]] = (
        {"placement_database": {"sqlite_synchronous": False}}
        if args.no_sync else {})
    for part in ("cycle", "race"):
        if args.only not in (None, part):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            url = args.world
            if url.startswith("sqlite:///"):
                copy = Path(tmp) / "world.sqlite"
                shutil.copy(url[len("sqlite:///"):], copy)
                url = "sqlite:///%s" % copy
            workers = 1 if part == "cycle" else args.workers
            with Server("berth", Path(tmp), workers=workers, db_url=url,
                        sections=sections) as server:
                if part == "cycle":
                    found = cycles(server, args.cycles)
                else:
                    run.claims(server, argparse.Namespace(
                        claims=200, clients=args.schedulers))
                    found = run.claims(server, argparse.Namespace(
                        claims=args.claims, clients=args.schedulers))
            print(json.dumps({"part": part, "workers": workers,
                              "no_sync": args.no_sync, **{
                                  k: round(v, 2) if isinstance(v, float) else v
                                  for k, v in found.items()}}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
