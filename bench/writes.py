"""What each write costs Berth, in-process: instructions per request.

    .venv/bin/python bench/bulk.py --hosts 1000 --allocations 10000 \\
        --url sqlite:////tmp/w1k.sqlite
    .venv/bin/python bench/writes.py --db /tmp/w1k.sqlite        # callgrind
    .venv/bin/python bench/writes.py --db /tmp/w1k.sqlite --cpu  # CPU time
    .venv/bin/python bench/writes.py --db /tmp/w1k.sqlite --profile claim_put

Copies the world (a ``bulk.py`` SQLite file; a PostgreSQL or MySQL
world's URL is written to as it is: give a copy) and runs each scenario
through the WSGI application in-process (no server, no socket, ``noauth2``,
no request log), a few times unmeasured (imports, statement caches, the
candidate cache's whole load) and then ``--count`` times measured. Under
valgrind (the default) only the WSGI calls themselves are counted: a
small C helper built here with ``gcc`` switches callgrind's collection on
and off around each call, so what the scenario prepares (a consumer to
delete, a provider's generation) and the client's own work are left out.
The counts are the same on every run, which is how two versions of the
write path are compared on this shared machine. Each scenario's request
runs right after the previous one's write, so a read (``claim_get``)
includes bringing the candidate cache up to date after the claim before
it, as a scheduler's next request does.

The bulk writes (``move_1``, ``move_10``, ``move_100``: one ``POST
/allocations`` moving that many consumers; ``reshape_10``,
``reshape_100``: a reshape carrying that many, ``reshaper`` being the
reshape of one) run only when named.

``--cpu`` reports instead the process CPU per request (the mean over
``--count``) and the statements each ran (cursor executions, BEGIN
included on SQLite, COMMIT not); ``--profile
NAME`` prints cProfile's top functions for one scenario.
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from write_scenarios import NAMES, Scenarios
from wsgi_meter import Client, Meter, worker_app

from berth.serve.memory import tune_gc

#: With ``--gc``, the collector runs as in a server (``tune_gc``).
SERVER_GC = False


def _app(url: str) -> Any:
    return worker_app(url, [tune_gc()] if SERVER_GC else [])


def _copy(db: str) -> Iterator[str]:
    if "://" in db:  # a database URL: written to as it is
        yield db
        return
    folder = tempfile.mkdtemp(prefix="berth-writes-")
    try:
        target = Path(folder) / Path(db).name
        shutil.copy(db, target)
        yield "sqlite:///%s" % target
    finally:
        shutil.rmtree(folder)


def run(
    url: str,
    names: list[str],
    count: int,
    warm: int,
    each: Callable[[str, Meter], None],
    statements: bool = False,
) -> None:
    """Run the scenarios in order; ``each(name, meter)`` after each."""
    if not SERVER_GC:
        gc.disable()
    meter = Meter()
    if statements:
        meter.count_statements()
    scen = Scenarios(Client(_app(url), meter), url)
    for name in names:
        step = getattr(scen, name)
        for _ in range(warm):
            step()
        meter.on = True
        meter.cpu = 0.0
        meter.statements = 0
        for _ in range(count):
            step()
        meter.on = False
        each(name, meter)


def _under_valgrind(args: argparse.Namespace, names: list[str]) -> None:
    folder = Path(tempfile.mkdtemp(prefix="berth-cg-out-"))
    try:
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--collect-atstart=no",
                "--callgrind-out-file=%s/cg.%%p" % folder,
                sys.executable,
                __file__,
                "--db",
                str(args.db),
                "--count",
                str(args.count),
                "--warm",
                str(args.warm),
                "--inner",
            ]
            + names,
            env={**os.environ, "PYTHONHASHSEED": "0"},
            check=True,
            stderr=subprocess.DEVNULL,
        )
        totals = {}
        for part in folder.iterdir():
            text = part.read_text(errors="replace")
            trigger = [line for line in text.splitlines()[:20] if line.startswith("desc: Trigger:")]
            total = [line for line in text.splitlines() if line.startswith(("totals:", "summary:"))]
            if trigger and total and "Client Request:" in trigger[0]:
                name = trigger[0].split("Client Request:", 1)[1].strip()
                totals[name] = int(total[-1].split()[1])
                if args.keep:
                    shutil.copy(part, Path(args.keep) / ("cg." + name))
        print("%-26s %s" % ("scenario", "M instructions per request"))
        for name in names:
            print("%-26s %.2f" % (name, totals.get(name, 0) / args.count / 1e6))
    finally:
        shutil.rmtree(folder)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("scenarios", nargs="*", help="default: all")
    ap.add_argument(
        "--db",
        required=True,
        help="a bulk.py world: a SQLite file (copied for the "
        "run), or a database URL (written to: give a copy)",
    )
    ap.add_argument("--count", type=int, default=5)
    ap.add_argument("--warm", type=int, default=3)
    ap.add_argument("--cpu", action="store_true", help="median process CPU instead of instructions")
    ap.add_argument("--profile", help="cProfile one scenario")
    ap.add_argument(
        "--gc",
        action="store_true",
        help="with --cpu: the garbage collector on, tuned as "
        "in a server (the default turns it off)",
    )
    ap.add_argument("--keep", help="folder for the callgrind files")
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    names = args.scenarios or NAMES
    global SERVER_GC
    SERVER_GC = args.gc
    if args.inner:
        for url in _copy(args.db):
            run(url, names, args.count, args.warm, lambda name, meter: meter.dump(name))
        return 0
    if args.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        for url in _copy(args.db):
            gc.disable()
            meter = Meter()
            scen = Scenarios(Client(_app(url), meter), url)
            step = getattr(scen, args.profile)
            for _ in range(args.warm):
                step()
            prof.enable()
            for _ in range(args.count):
                step()
            prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(45)
        return 0
    if args.cpu:
        for url in _copy(args.db):

            def show(name: str, meter: Meter) -> None:
                print(
                    "%-26s %.2f ms %5.1f statements"
                    % (name, meter.cpu / args.count * 1e3, meter.statements / args.count)
                )

            run(url, names, args.count, args.warm, show, statements=True)
        return 0
    _under_valgrind(args, names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
