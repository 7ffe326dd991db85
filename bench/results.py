"""The current results table of ``bench/README.md``, from ``bench/latest.json``.

    .venv/bin/python bench/results.py                 # rewrite the table
    .venv/bin/python bench/results.py --check         # exit 1 if it is stale
    .venv/bin/python bench/results.py record --benchmark write_table.py \\
        --measure "PUT /allocations/{c} (claim), SQLite, server CPU ms" \\
        --berth 1.50 --upstream 15.42 --source journal/2026-12-04.md

``latest.json`` holds the newest figure of each measure (one row per
measure, the benchmark that gave it, the day it ran and where its
method and whole output are written down) and the machine the figures
ran on. The table between the ``results:begin`` and ``results:end``
markers of ``README.md`` is written from it and nothing else; ``record``
replaces (or adds) one measure's row, dated today, and stores the
machine this command runs on (CPU model, cores, memory, Python, SQLite,
and the PostgreSQL and MariaDB servers it can reach), so record a
figure on the machine that measured it.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import sqlite3
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
STORE = HERE / "latest.json"
README = HERE / "README.md"
BEGIN = "<!-- results:begin (written by bench/results.py; do not edit) -->"
END = "<!-- results:end -->"
#: Where ``record`` looks for database servers (the test suite's URLs).
SERVERS = {
    "PostgreSQL": os.environ.get(
        "BERTH_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
    ),
    "MariaDB": os.environ.get("BERTH_TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/"),
}


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gib() -> float | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 2**20, 1)
    except OSError:
        pass
    return None


def _server_version(url: str) -> str | None:
    """The version a database server at ``url`` reports, or None."""
    try:
        import sqlalchemy as sa

        engine = sa.create_engine(url, connect_args={"connect_timeout": 3})
        try:
            with engine.connect() as conn:
                return str(conn.scalar(sa.text("SELECT version()")))
        finally:
            engine.dispose()
    except Exception:  # noqa: BLE001 - a server not there is recorded as such
        return None


def machine() -> dict[str, Any]:
    """What this machine is, as the table's heading shows it."""
    found: dict[str, Any] = {
        "cpu": _cpu_model(),
        "cores": os.cpu_count(),
        "memory_gib": _memory_gib(),
        "python": platform.python_version(),
        "sqlite": sqlite3.sqlite_version,
    }
    for name, url in SERVERS.items():
        version = _server_version(url)
        if version is not None:
            # "PostgreSQL 15.20 (Debian ...) on x86_64..., compiled by ..."
            found[name.lower()] = version.split(" on ")[0].split(",")[0].removeprefix("PostgreSQL ")
    return found


def table(store: dict[str, Any]) -> str:
    """The section between the markers, from ``store``."""
    m = store["machine"]
    servers = ", ".join(
        "%s %s" % (name, m[name.lower()]) for name in SERVERS if m.get(name.lower())
    )
    lines = [
        BEGIN,
        "",
        "Newest figure of each measure, as `bench/latest.json` holds it "
        "(written %s). Machine: %s, %s cores, %s GiB, Python %s, SQLite "
        "%s%s (recorded %s). %s"
        % (
            store["written"],
            m["cpu"],
            m["cores"],
            m["memory_gib"],
            m["python"],
            m["sqlite"],
            ", " + servers if servers else "",
            m["recorded"],
            store.get("note", ""),
        ),
        "",
        "| benchmark | measure | Berth | upstream or baseline | ratio | run |"
        " method and full output |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for row in store["rows"]:
        lines.append(
            "| `%s` | %s | %s | %s | %s | %s | [%s](%s) |"
            % (
                row["benchmark"],
                row["measure"],
                row["berth"],
                row.get("upstream", "—"),
                _ratio(row),
                row["date"],
                row["source"].split("#")[0].split("/")[-1],
                row["source"],
            )
        )
    lines += ["", END]
    return "\n".join(lines)


def _ratio(row: dict[str, Any]) -> str:
    """Upstream over Berth for costs, Berth over upstream for rates;
    as given where either side is a range or text."""
    if "ratio" in row:
        return str(row["ratio"])
    try:
        berth, upstream = float(row["berth"]), float(row["upstream"])
    except (KeyError, ValueError):
        return "—"
    value = berth / upstream if row.get("higher_is_better") else (upstream / berth)
    return "%.1fx" % value


def rewrite(readme: str, store: dict[str, Any]) -> str:
    """``readme`` with its results section written anew."""
    start, end = readme.index(BEGIN), readme.index(END) + len(END)
    return readme[:start] + table(store) + readme[end:]


def record(store: dict[str, Any], args: argparse.Namespace) -> None:
    """Put one measure's newest figure in ``store``, dated today, with
    this machine."""
    today = dt.date.today().isoformat()
    row: dict[str, Any] = {
        "benchmark": args.benchmark,
        "measure": args.measure,
        "berth": args.berth,
        "date": today,
        "source": args.source,
    }
    if args.upstream is not None:
        row["upstream"] = args.upstream
    if args.higher_is_better:
        row["higher_is_better"] = True
    rows = [r for r in store["rows"] if r["measure"] != args.measure]
    kept = [r for r in store["rows"] if r["measure"] == args.measure]
    at = store["rows"].index(kept[0]) if kept else len(rows)
    rows.insert(at, row)
    store["rows"] = rows
    store["machine"] = {**machine(), "recorded": today}
    store["written"] = today


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--check", action="store_true", help="exit 1 when README.md's table is not the store's"
    )
    sub = ap.add_subparsers(dest="command")
    rec = sub.add_parser("record", help="store one measure's newest figure")
    rec.add_argument("--benchmark", required=True)
    rec.add_argument("--measure", required=True)
    rec.add_argument("--berth", required=True)
    rec.add_argument("--upstream")
    rec.add_argument(
        "--higher-is-better",
        action="store_true",
        help="a rate (claims/s): the ratio is Berth/upstream",
    )
    rec.add_argument("--source", required=True, help="where the run is written up, from bench/")
    args = ap.parse_args(argv)
    store = json.loads(STORE.read_text())
    if args.command == "record":
        record(store, args)
        STORE.write_text(json.dumps(store, indent=2, ensure_ascii=False) + "\n")
    readme = README.read_text()
    fresh = rewrite(readme, store)
    if args.check:
        if fresh != readme:
            print("bench/README.md's results are stale: run bench/results.py", file=sys.stderr)
            return 1
        return 0
    README.write_text(fresh)
    return 0


if __name__ == "__main__":
    sys.exit(main())
