"""Server time of every dashboard page at 1,000 hosts (in-process).

Builds the benchmark deployment straight into a fresh SQLite file
(``world.plan`` + ``bulk.write``: 1,000 hosts and, by default, 10,000
allocations, so the consumers list is 10,000 rows long), then asks each
page through the whole WSGI stack in this process, once unmeasured (the
world cache fills) and then ``--repeat`` times, and prints the median and
the worst time per page. Also the cost of an unchanged page (a 304 on its
ETag), of the live refresh's poll of the change feed when nothing
changed (``/dashboard/changes``) and of its fallback, the
``/dashboard/seq`` poll.

    .venv/bin/python bench/dashboard.py                  # about a minute
    .venv/bin/python bench/dashboard.py --hosts 200 --repeat 5
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bulk  # noqa: E402
import world as world_mod  # noqa: E402

from berth import conf as berth_conf  # noqa: E402
from berth.api.app import create_app  # noqa: E402
from berth.db import migrate  # noqa: E402
from berth.db.engine import Database, create_engine  # noqa: E402

QUERY = "resources=VCPU:2,MEMORY_MB:2048,DISK_GB:20"
PAGES = [
    ("overview", "/dashboard"),
    ("overview, aggregates page 2", "/dashboard?page=2"),
    ("provider trees", "/dashboard/providers"),
    ("provider trees, page 20", "/dashboard/providers?page=20"),
    ("trees by name search", "/dashboard/providers?by=name&q=cn-01"),
    ("trees by trait", "/dashboard/providers?by=trait&q=HW_CPU_X86_AVX2"),
    ("consumers", "/dashboard/consumers"),
    ("consumers, last page", "/dashboard/consumers?page=200"),
    ("by project", "/dashboard/consumers?view=project"),
    ("by user", "/dashboard/consumers?view=user"),
    ("by consumer type", "/dashboard/consumers?view=type"),
    ("explain form", "/dashboard/explain?q=" + QUERY.replace("&", "%26")),
    ("fit form", "/dashboard/fit?q=" + QUERY.replace("&", "%26")),
    ("first hosts, spread", "/dashboard/first?order=spread&q=" + QUERY.replace("&", "%26")),
    (
        "first hosts, spread, limit 1000",
        "/dashboard/first?order=spread&q=" + QUERY.replace("&", "%26") + "%26limit%3D1000",
    ),
    (
        "first hosts, uuid, limit 1000",
        "/dashboard/first?order=uuid&q=" + QUERY.replace("&", "%26") + "%26limit%3D1000",
    ),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--allocations", type=int, default=10000)
    ap.add_argument("--repeat", type=int, default=10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        engine = create_engine("sqlite:///%s/bench.sqlite" % tmp)
        migrate.upgrade(engine)
        plan = world_mod.plan(args.hosts, 7, args.allocations)
        start = time.perf_counter()
        Database(engine).run(lambda conn: bulk.write(conn, plan))
        print(
            "built %d hosts, %d allocations in %.1fs"
            % (args.hosts, args.allocations, time.perf_counter() - start)
        )
        conf = berth_conf.load([])
        conf.set_override("auth_strategy", "noauth2", group="api")
        conf.set_override("request_log", False, group="berth")
        app = create_app(conf, Database(engine))
        client = httpx.Client(transport=httpx.WSGITransport(app=app), base_url="http://berth.bench")
        print("%-30s %10s %10s" % ("page", "median ms", "max ms"))

        def timed(
            path: str, headers: dict[str, str] | None = None
        ) -> tuple[float, float, httpx.Response]:
            times = []
            resp = client.get(path, headers=headers)  # unmeasured
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                resp = client.get(path, headers=headers)
                times.append((time.perf_counter() - t0) * 1000)
            return statistics.median(times), max(times), resp

        for label, path in PAGES:
            median, worst, resp = timed(path)
            assert resp.status_code == 200, (path, resp.text[:300])
            print("%-30s %10.1f %10.1f" % (label, median, worst))
        tag = client.get("/dashboard").headers["etag"]
        median, worst, resp = timed("/dashboard", {"if-none-match": tag})
        assert resp.status_code == 304
        print("%-30s %10.1f %10.1f" % ("unchanged page (304)", median, worst))
        page = client.get("/dashboard").text
        position = page.split('data-position="')[1].split('"')[0]
        kinds = {k for part in page.split('data-live="')[1:] for k in part.split('"')[0].split(",")}
        median, worst, resp = timed(
            "/dashboard/changes?after=%s&limit=50&kind=%s"
            % (position, ",".join(sorted(kinds | {"resync"}))),
            {"accept": "application/json"},
        )
        assert resp.status_code == 200 and resp.json()["events"] == []
        print("%-30s %10.1f %10.1f" % ("feed poll, no event", median, worst))
        median, worst, resp = timed("/dashboard/seq")
        print("%-30s %10.1f %10.1f" % ("/dashboard/seq poll", median, worst))
        engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
