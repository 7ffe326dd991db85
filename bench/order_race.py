"""Claims race by candidate order (issue 23, item 5): Berth in each
``[berth] candidate_order`` against upstream Placement with
``[placement] randomize_allocation_candidates`` false and true, in one run.

    PYTHONPATH=$PWD/src BERTH_VENV=/work/main/.venv \\
    UPSTREAM_VENV=/work/main/.upstream-venv \\
        /work/main/.venv/bin/python bench/order_race.py --hosts 10000

One world (``world.plan``, one existing instance per host on average, so
some hosts start empty) is written in bulk into Berth's schema and copied
into upstream's with ``berth db export``. Each case gets a fresh copy of
that SQLite file and a server with ``--workers`` workers; 16 schedulers,
each its own process (``run.claims``), ask
``GET /allocation_candidates?resources=VCPU:1,MEMORY_MB:2048,DISK_GB:20
&limit=1000`` at microversion 1.39, PUT the *first* candidate for a new
consumer (null consumer generation), and ask again after a 409, until
``--claims`` claims in all are made or ``--seconds`` have passed.

Then, from the database: per compute host (a root provider and its
children), VCPU and MEMORY_MB in use; their coefficient of variation
(standard deviation / mean) across hosts, and the hosts with nothing in
use at all. Also reported: claims per second, 409s per successful claim,
the server's CPU per claim (its process group) and the load average.
Results go to ``bench/results/order-race-<time>.json`` and a Markdown
table beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import sqlalchemy as sa

# bench/ for its sibling scripts, the repository root for support/.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import bulk  # noqa: E402
import run  # noqa: E402
import scale  # noqa: E402
import world as world_mod  # noqa: E402

from berth.db import setup  # noqa: E402
from berth.db.engine import Database, create_engine  # noqa: E402
from support.servers import ROOT, Server  # noqa: E402

QUERY = "resources=VCPU:1,MEMORY_MB:2048,DISK_GB:20&limit=1000"
#: label -> (implementation, placement.conf settings by section)
CASES: dict[str, tuple[str, dict[str, dict[str, object]]]] = {
    "berth uuid": ("berth", {"berth": {"candidate_order": "uuid"}}),
    "berth random": ("berth", {"berth": {"candidate_order": "random"}}),
    "berth spread": ("berth", {"berth": {"candidate_order": "spread"}}),
    "berth pack": ("berth", {"berth": {"candidate_order": "pack"}}),
    "upstream": ("upstream", {}),
    "upstream randomized": ("upstream", {"placement": {"randomize_allocation_candidates": True}}),
}
#: Upstream keeps standard classes out of its resource_classes table, with
#: these ids (their place in os-resource-classes' list).
UPSTREAM_CLASS_IDS = {"VCPU": 0, "MEMORY_MB": 1}


def _class_ids(conn: sa.Connection, kind: str) -> dict[str, int]:
    if kind == "upstream":
        return UPSTREAM_CLASS_IDS
    rows = conn.execute(
        sa.text("SELECT name, id FROM resource_classes WHERE name IN ('VCPU', 'MEMORY_MB')")
    ).all()
    return {name: rid for name, rid in rows}


def imbalance(url: str, kind: str) -> dict[str, float | int]:
    """CV of VCPU and MEMORY_MB use across compute hosts (root providers
    named cn-*, with their children), and how many have nothing in use."""
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        ids = _class_ids(conn, kind)
        roots = [
            r[0]
            for r in conn.execute(
                sa.text(
                    "SELECT id FROM resource_providers WHERE parent_provider_id IS NULL"
                    " AND name LIKE 'cn-%'"
                )
            )
        ]
        used: dict[int, dict[int, int]] = {r: {} for r in roots}
        for root, rc, amount in conn.execute(
            sa.text(
                "SELECT rp.root_provider_id, a.resource_class_id, SUM(a.used)"
                " FROM allocations a JOIN resource_providers rp"
                " ON rp.id = a.resource_provider_id"
                " GROUP BY rp.root_provider_id, a.resource_class_id"
            )
        ):
            if root in used:
                used[root][rc] = int(amount)
    engine.dispose()
    out: dict[str, float | int] = {"hosts": len(roots)}
    for name in ("VCPU", "MEMORY_MB"):
        values = [used[r].get(ids[name], 0) for r in roots]
        mean = statistics.fmean(values)
        out["cv_" + name] = statistics.pstdev(values) / mean if mean else 0.0
    out["empty_hosts"] = sum(1 for r in roots if not any(used[r].values()))
    return out


def one(label: str, source: Path, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    kind, sections = CASES[label]
    db = workdir / ("%s.sqlite" % label.replace(" ", "-"))
    shutil.copy(source, db)
    url = "sqlite:///%s" % db
    server = Server(kind, workdir / label.replace(" ", "-"), args.workers, url, sections=sections)
    out: dict[str, Any] = {}
    with server:
        # The first answer loads the world (Berth) and warms both; not timed.
        start = time.perf_counter()
        run.measure(server, QUERY, 1, args.timeout)
        out["first_answer_s"] = time.perf_counter() - start
        load0 = os.getloadavg()[0]
        race = argparse.Namespace(
            claims=args.claims,
            clients=args.clients,
            claims_seconds=args.seconds,
            query=QUERY,
            first=True,
        )
        out.update(run.claims(server, race))
        out["load_before"] = load0
        out["load_after"] = os.getloadavg()[0]
    out["conflicts_per_claim"] = out["conflicts"] / max(out["claims"], 1)
    out.update(imbalance(url, kind))
    db.unlink()
    return out


def table(results: dict[str, dict[str, Any]], initial: dict[str, Any]) -> str:
    lines = [
        "| order | claims | claims/s | 409s per claim | CV VCPU | CV MEM "
        "| empty hosts | server CPU ms/claim | failed (5xx) "
        "| load avg (1 min, before/after) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    lines.append(
        "| (the world before the race) | - | - | - | %.3f | %.3f | %d | - | - | - |"
        % (initial["cv_VCPU"], initial["cv_MEMORY_MB"], initial["empty_hosts"])
    )
    for label, r in results.items():
        if "error" in r:
            lines.append("| %s | %s |" % (label, r["error"]))
            continue
        lines.append(
            "| %s | %d | %.1f | %.2f | %.3f | %.3f | %d | %.1f | %d | %.1f/%.1f |"
            % (
                label,
                r["claims"],
                r["claims_per_s"],
                r["conflicts_per_claim"],
                r["cv_VCPU"],
                r["cv_MEMORY_MB"],
                r["empty_hosts"],
                r["server_cpu_ms_per_claim"],
                r["errors"],
                r["load_before"],
                r["load_after"],
            )
        )
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--hosts", type=int, default=10000)
    p.add_argument("--claims", type=int, default=800)
    p.add_argument(
        "--seconds", type=float, default=90.0, help="no new claim after this many seconds"
    )
    p.add_argument("--clients", type=int, default=16)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--only", nargs="*", choices=list(CASES))
    p.add_argument("--keep", action="store_true", help="keep the work directory (servers' logs)")
    args = p.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="berth-order-race-"))
    berth_db = workdir / "world.sqlite"
    upstream_db = workdir / "world-upstream.sqlite"
    start = time.perf_counter()
    world = world_mod.plan(args.hosts, allocations=args.hosts)
    engine = create_engine("sqlite:///%s" % berth_db)
    setup.prepare(engine)
    Database(engine).run(lambda conn: bulk.write(conn, world))
    engine.dispose()
    built = time.perf_counter() - start
    labels = args.only or list(CASES)
    exported = None
    if any(CASES[lb][0] == "upstream" for lb in labels):
        failed = scale.export("sqlite:///%s" % berth_db, "sqlite:///%s" % upstream_db, workdir)
        if failed:
            print("export failed: %s" % failed, flush=True)
            labels = [lb for lb in labels if CASES[lb][0] == "berth"]
        exported = time.perf_counter() - start - built
    print(
        "%d hosts: built in %.1f s, exported in %s s"
        % (args.hosts, built, "%.1f" % exported if exported else "-"),
        flush=True,
    )
    initial = imbalance("sqlite:///%s" % berth_db, "berth")
    results: dict[str, dict[str, Any]] = {}
    for label in labels:
        source = upstream_db if CASES[label][0] == "upstream" else berth_db
        try:
            results[label] = one(label, source, workdir, args)
        except Exception as exc:  # noqa: BLE001 - a failed case is reported
            results[label] = {"error": repr(exc)}
        print(label, json.dumps(results[label]), flush=True)
    text = table(results, initial)
    print(text)
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    (out / ("order-race-%s.json" % stamp)).write_text(
        json.dumps(
            {
                "args": vars(args),
                "built_s": built,
                "exported_s": exported,
                "initial": initial,
                "results": results,
            },
            indent=1,
        )
    )
    (out / ("order-race-%s.md" % stamp)).write_text(text + "\n")
    if args.keep:
        print("kept", workdir)
    else:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
