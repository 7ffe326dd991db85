"""The floor of a statement: what a prebuilt one-row ``SELECT`` and an
empty transaction cost through the connection ``Database.run`` hands out,
against the bare driver.

    PYTHONPATH=src .venv/bin/python bench/exec_floor.py            # µs each
    PYTHONPATH=src .venv/bin/python bench/exec_floor.py --profile select
    valgrind --tool=callgrind .venv/bin/python bench/exec_floor.py --only select

``--only`` runs one case ``--count`` times and nothing else, so that two
callgrind runs (``--only none`` and ``--only select``) give instructions
per statement by difference. A throw-away SQLite file holds Berth's
tables; ``--url`` takes another (migrated) database instead.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from berth.db import tables as t
from berth.db.engine import Database, create_engine

RP = t.resource_providers
SELECT = sa.select(RP.c.id, RP.c.uuid, RP.c.generation).where(RP.c.uuid == sa.bindparam("b_uuid"))


def cases(db: Database, count: int) -> dict[str, Callable[[], Any]]:
    def select(conn: Any) -> None:
        for _ in range(count):
            conn.execute(SELECT, {"b_uuid": "x"}).first()

    def empty(_conn: Any) -> None:
        return None

    found: dict[str, Callable[[], Any]] = {
        "none": lambda: None,
        "select": lambda: db.run(select),
        "write_tx": lambda: [db.run(empty) for _ in range(count)],
        "read_tx": lambda: [db.read(empty) for _ in range(count)],
    }
    if db.backend == "sqlite":
        path = db.engine.url.database
        raw = sqlite3.connect(str(path), isolation_level=None)
        sql = str(SELECT.compile(db.engine))

        def bare_select() -> None:
            cur = raw.cursor()
            for _ in range(count):
                cur.execute(sql, ("x",)).fetchone()

        def bare_tx() -> None:
            for _ in range(count):
                raw.execute("BEGIN IMMEDIATE")
                raw.execute("COMMIT")

        found.update(bare_select=bare_select, bare_tx=bare_tx)
    return found


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", help="a migrated database (default: SQLite, a throw-away file)")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--only", help="run this case once, unmeasured")
    ap.add_argument("--profile", help="cProfile this case")
    args = ap.parse_args()
    folder = tempfile.mkdtemp(prefix="berth-exec-floor-")
    url = args.url or "sqlite:///%s" % (Path(folder) / "floor.sqlite")
    engine = create_engine(url)
    if not args.url:
        t.metadata.create_all(engine)
    db = Database(engine)
    found = cases(db, args.count)
    for run in found.values():  # warm: compiled caches, pool
        run()
    if args.only:
        found[args.only]()
        return 0
    if args.profile:
        prof = cProfile.Profile()
        prof.enable()
        found[args.profile]()
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(40)
        return 0
    for name, run in found.items():
        if name == "none":
            continue
        best = min(_timed(run) for _ in range(5))
        print("%-12s %7.1f µs" % (name, best / args.count * 1e6))
    return 0


def _timed(run: Callable[[], Any]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


if __name__ == "__main__":
    raise SystemExit(main())
