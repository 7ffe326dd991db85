"""Every write endpoint, Berth against upstream in the same run: server
CPU per request (and, on PostgreSQL, the database backends' CPU).

    BERTH_VENV=... UPSTREAM_VENV=... PYTHONPATH=src \\
        .venv/bin/python bench/write_table.py                  # 1,000 hosts
    .venv/bin/python bench/write_table.py --hosts 100 --count 20 --db sqlite

For each database kind (a SQLite file; a fresh PostgreSQL database per
implementation), the world of ``bulk.py`` (``--hosts`` hosts, ten
allocations per host) is written into Berth's schema and copied into
upstream's with ``berth db export``, as ``scale.py`` does, so both serve
the same deployment. Then Berth and upstream (one gunicorn worker each,
one at a time) get the same writes over HTTP: each scenario a few times
unmeasured, then ``--count`` times measured. The scenarios are those of
``writes.py`` (which measures Berth in-process) plus re-parenting and the
creation of a custom resource class and trait; what a scenario prepares
(a provider to delete, a consumer to move, a generation) is sent
unmeasured.

Measured: the CPU of the server's process group and, on PostgreSQL, of
the database's backend processes serving this database (``postgres:``
processes whose command line names it), read from
``/proc/<pid>/schedstat`` (nanoseconds) right before and after each
measured request and summed. CPU, not wall time: the machine is shared.
Results go to ``bench/results/write-table-<time>.json`` and a Markdown
table beside it.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

# bench/ for its sibling scripts, the repository root for support/.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import scale  # noqa: E402
import writes  # noqa: E402

from support.servers import ROOT, Server, process_cpu  # noqa: E402

Result = dict[str, Any]

#: Scenario: (label in the table, writes.Scenarios or WriteScenarios method)
SCENARIOS: list[tuple[str, str]] = [
    ("POST /resource_providers (child)", "post_resource_provider"),
    ("PUT /resource_providers/{u} (rename)", "put_resource_provider"),
    ("PUT /resource_providers/{u} (re-parent)", "reparent_resource_provider"),
    ("DELETE /resource_providers/{u}", "delete_resource_provider"),
    ("PUT .../inventories/VCPU (one)", "put_inventory"),
    ("PUT .../inventories (all)", "put_inventories"),
    ("PUT .../traits", "put_traits"),
    ("PUT .../aggregates", "put_aggregates"),
    ("PUT /allocations/{c} (claim, new consumer)", "claim_new"),
    ("PUT /allocations/{c} (move)", "put_allocations_move"),
    ("POST /allocations (2 new consumers)", "post_allocations"),
    ("DELETE /allocations/{c}", "delete_allocations"),
    ("POST /reshaper", "reshaper"),
    ("PUT /resource_classes/CUSTOM_X (new)", "put_resource_class"),
    ("PUT /traits/CUSTOM_X (new)", "put_trait"),
    ("GET /resource_providers/{u}/usages (a read)", "get_usages"),
    ("GET / (not a write: the serving floor)", "version_document"),
]
#: Asked for by name only (``--scenarios``): bulk writes, by how many
#: consumers one request carries (issue 24: they stay proportional).
BULK: list[tuple[str, str]] = [
    ("POST /allocations moving 1 consumer", "move_1"),
    ("POST /allocations moving 10 consumers", "move_10"),
    ("POST /allocations moving 100 consumers", "move_100"),
    ("POST /reshaper, 10 consumers", "reshape_10"),
    ("POST /reshaper, 100 consumers", "reshape_100"),
]


class ProcCPU:
    """CPU nanoseconds of a server's process group and of the PostgreSQL
    backends of one database, from ``/proc/<pid>/schedstat`` (the
    processes found by ``process_cpu``'s walk of ``/proc``)."""

    def __init__(self, pgid: int, database: str | None) -> None:
        self.pgid = pgid
        self.marker = (" %s " % database).encode() if database else None
        #: pid: whether it is a backend of this database (a pid's command
        #: line keeps its database name for the pid's life)
        self.backends: dict[int, bool] = {}

    def _backend(self, pid: int) -> bool:
        if pid not in self.backends:
            try:
                with open("/proc/%d/cmdline" % pid, "rb") as f:
                    cmd = f.read().replace(b"\0", b" ")
            except OSError:
                return False
            self.backends[pid] = (
                cmd.startswith(b"postgres:") and self.marker is not None and self.marker in cmd
            )
        return self.backends[pid]

    def read(self) -> tuple[int, int]:
        server: list[int] = []
        db: list[int] = []

        def wanted(pid: int, fields: list[str]) -> bool:
            if int(fields[2]) == self.pgid:
                server.append(pid)
            elif self.marker and self._backend(pid):
                db.append(pid)
            return False

        process_cpu(wanted)
        return self._ns(server), self._ns(db)

    @staticmethod
    def _ns(pids: list[int]) -> int:
        total = 0
        for pid in pids:
            try:
                with open("/proc/%d/schedstat" % pid) as f:
                    total += int(f.read().split()[0])
            except (OSError, ValueError):
                continue
        return total


class Meter:
    """What ``writes.Scenarios`` switches around a measured request: here,
    sums of the server's and the database's CPU."""

    def __init__(self, cpu: ProcCPU) -> None:
        self.cpu = cpu
        self.on = False
        self.server_ns = self.db_ns = 0
        self._before = (0, 0)

    def start(self) -> None:
        if self.on:
            self._before = self.cpu.read()

    def stop(self) -> None:
        if self.on:
            server, db = self.cpu.read()
            self.server_ns += server - self._before[0]
            self.db_ns += db - self._before[1]


class HttpClient:
    """The interface of ``writes.Client`` over HTTP to a running server."""

    def __init__(self, base: str, meter: Meter) -> None:
        self.http = httpx.Client(
            base_url=base,
            timeout=300,
            headers={
                "x-auth-token": "admin",
                "accept": "application/json",
                "openstack-api-version": writes.VERSION,
            },
        )
        self.meter = meter

    def __call__(self, method: str, path: str, body: Any = None, expect: int = 200) -> Any:
        self.meter.start()
        r = self.http.request(method, path, json=body)
        self.meter.stop()
        if r.status_code != expect:
            raise RuntimeError("%s %s: %s %r" % (method, path, r.status_code, r.text[:300]))
        return r.json() if r.content else None


class WriteScenarios(writes.Scenarios):
    """``writes.Scenarios`` with hosts found over the API, and the writes
    it lacks."""

    def __init__(self, call: Any) -> None:
        self.call = call
        found = call("GET", "/resource_providers?resources=VCPU:1")
        self.hosts = sorted(
            p["uuid"] for p in found["resource_providers"] if p["parent_provider_uuid"] is None
        )
        self.n = 0

    def claim_new(self) -> None:
        """PUT /allocations/{new consumer} on a host (no candidates
        request first: the write alone)."""
        self.call("PUT", "/allocations/%s" % uuid.uuid4(), self._claim_body(self._next_host()), 204)

    def reparent_resource_provider(self) -> None:
        """PUT /resource_providers/{u}: a child moves to another host."""
        with self._quiet():
            made = self.call(
                "POST",
                "/resource_providers",
                {"name": "move-%s" % uuid.uuid4(), "parent_provider_uuid": self._next_host()},
            )
        self.call(
            "PUT",
            "/resource_providers/%s" % made["uuid"],
            {"name": made["name"], "parent_provider_uuid": self._next_host()},
        )

    def put_resource_class(self) -> None:
        """PUT /resource_classes/CUSTOM_X, a new class."""
        self.call("PUT", "/resource_classes/CUSTOM_W%s" % uuid.uuid4().hex.upper(), None, 201)

    def version_document(self) -> None:
        """GET /: the cost of any request under this server."""
        self.call("GET", "/")

    def put_trait(self) -> None:
        """PUT /traits/CUSTOM_X, a new trait."""
        self.call("PUT", "/traits/CUSTOM_W%s" % uuid.uuid4().hex.upper(), None, 201)


def measure(
    server: Server, database: str | None, count: int, warm: int, names: list[str]
) -> Result:
    assert server.proc is not None
    meter = Meter(ProcCPU(server.proc.pid, database))
    scen = WriteScenarios(HttpClient(server.url, meter))
    out: Result = {"hosts_seen": len(scen.hosts)}
    for name in names:
        step = getattr(scen, name)
        for _ in range(warm):
            step()
        meter.on = True
        meter.server_ns = meter.db_ns = 0
        started = time.perf_counter()
        for _ in range(count):
            step()
        meter.on = False
        out[name] = {
            "server_cpu_ms": meter.server_ns / count / 1e6,
            "db_cpu_ms": meter.db_ns / count / 1e6 if database else None,
            "wall_s": time.perf_counter() - started,
        }
        print(
            "    %-28s server %.2f ms%s"
            % (
                name,
                out[name]["server_cpu_ms"],
                "  db %.2f ms" % out[name]["db_cpu_ms"] if database else "",
            ),
            flush=True,
        )
    return out


def one_db(kind: str, hosts: int, workdir: Path, args: argparse.Namespace) -> Result:
    dbs = scale.Databases(kind, workdir)
    out: Result = {}
    try:
        berth_url = dbs.new("wt_berth_%d" % hosts)
        out["build"] = scale.build(berth_url, hosts)
        print("  %s %d hosts: built %s" % (kind, hosts, out["build"]), flush=True)
        urls = {"berth": berth_url}
        if args.only != "berth":
            upstream_url = dbs.new("wt_upstream_%d" % hosts)
            failed = scale.export(berth_url, upstream_url, workdir)
            if failed:
                raise RuntimeError("export failed: %s" % failed)
            # Upstream's venv has psycopg2, not psycopg 3.
            urls["upstream"] = upstream_url.replace(
                "postgresql+psycopg://", "postgresql+psycopg2://", 1
            )
        for impl, url in urls.items():
            if args.only and impl != args.only:
                continue
            database = None if kind == "sqlite" else url.rsplit("/", 1)[1]
            server = Server(impl, workdir / ("%s-%s" % (impl, kind)), 1, url)
            server.start()
            try:
                print("  %s on %s" % (impl, kind), flush=True)
                out[impl] = measure(server, database, args.count, args.warm, args.scenarios)
            finally:
                server.stop()
    finally:
        dbs.drop()
    return out


def table(results: Result) -> str:
    kinds = list(results["dbs"])
    head = "| write |"
    rule = "| --- |"
    for kind in kinds:
        head += " %s Berth | upstream | ratio |" % kind
        rule += " --- | --- | --- |"
        if kind != "sqlite":
            head += " %s DB Berth | DB upstream |" % kind
            rule += " --- | --- |"
    lines = [head, rule]
    for label, name in SCENARIOS + BULK:
        if name not in results["scenarios"]:
            continue
        row = "| %s |" % label
        for kind in kinds:
            res = results["dbs"][kind]
            b = res.get("berth", {}).get(name)
            u = res.get("upstream", {}).get(name)
            bs = b["server_cpu_ms"] if b else None
            us = u["server_cpu_ms"] if u else None
            row += " %s | %s | %s |" % (
                "-" if bs is None else "%.2f" % bs,
                "-" if us is None else "%.2f" % us,
                "**%.1fx**" % (us / bs) if bs and us else "-",
            )
            if kind != "sqlite":
                row += " %s | %s |" % (
                    "-" if not b else "%.2f" % b["db_cpu_ms"],
                    "-" if not u else "%.2f" % u["db_cpu_ms"],
                )
        lines.append(row)
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--count", type=int, default=200, help="measured requests per write")
    ap.add_argument("--warm", type=int, default=5, help="unmeasured requests per write first")
    ap.add_argument(
        "--db", nargs="+", default=["sqlite", "postgresql"], choices=["sqlite", "postgresql"]
    )
    ap.add_argument("--only", choices=["berth", "upstream"])
    ap.add_argument(
        "--scenarios",
        nargs="+",
        default=[name for _, name in SCENARIOS],
        choices=[name for _, name in SCENARIOS + BULK],
    )
    ap.add_argument("--out", type=Path, default=ROOT / "bench" / "results")
    args = ap.parse_args()
    results: Result = {
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "hosts": args.hosts,
        "count": args.count,
        "warm": args.warm,
        "scenarios": args.scenarios,
        "load_before": os.getloadavg(),
        "cpus": os.cpu_count(),
        "dbs": {},
    }
    workdir = Path(tempfile.mkdtemp(prefix="berth-write-table-"))
    for kind in args.db:
        results["dbs"][kind] = one_db(kind, args.hosts, workdir / kind, args)
    results["load_after"] = os.getloadavg()
    text = table(results)
    print(text)
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    (args.out / ("write-table-%s.json" % stamp)).write_text(json.dumps(results, indent=1))
    (args.out / ("write-table-%s.md" % stamp)).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
