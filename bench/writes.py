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
import ctypes
import functools
import gc
import io
import os
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa

from berth import conf as berth_conf
from berth.api.app import create_app
from berth.db.engine import Database, create_engine
from berth.serve import preload
from berth.serve.memory import tune_gc

VERSION = "placement 1.39"
CANDIDATES = "resources=VCPU:1,MEMORY_MB:512,DISK_GB:10&limit=5"

_HELPER = r"""
#include <valgrind/callgrind.h>
void berth_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }
void berth_dump(const char *name) { CALLGRIND_DUMP_STATS_AT(name); }
"""


class Meter:
    """Switches callgrind's collection around measured calls (a no-op
    outside valgrind: the client requests are then plain no-ops)."""

    def __init__(self) -> None:
        folder = Path(tempfile.mkdtemp(prefix="berth-cg-"))
        (folder / "t.c").write_text(_HELPER)
        subprocess.run(
            ["gcc", "-O1", "-shared", "-fPIC", "-o", str(folder / "t.so"), str(folder / "t.c")],
            check=True,
        )
        self.lib = ctypes.CDLL(str(folder / "t.so"))
        self.lib.berth_dump.argtypes = [ctypes.c_char_p]
        self.on = False
        self.cpu = 0.0
        #: Statements the measured calls ran (cursor executions: an
        #: ``executemany`` is one; BEGIN and COMMIT are not counted).
        self.statements = 0
        self._counting = False

    def count_statements(self) -> None:
        """Count the statements of the measured calls (not under
        valgrind: a listener puts SQLAlchemy on a slower path)."""
        sa.event.listen(sa.engine.Engine, "before_cursor_execute", self._count)

    def _count(self, *args: Any) -> None:
        if self._counting:
            self.statements += 1

    def start(self) -> None:
        if self.on:
            self._counting = True
            self.cpu -= time.process_time()
            self.lib.berth_toggle()

    def stop(self) -> None:
        if self.on:
            self.lib.berth_toggle()
            self.cpu += time.process_time()
            self._counting = False

    def dump(self, name: str) -> None:
        self.lib.berth_dump(name.encode())


class Client:
    """WSGI calls straight into the app, measured by ``meter``."""

    def __init__(self, app: Any, meter: Meter) -> None:
        self.app, self.meter = app, meter

    def __call__(self, method: str, path: str, body: Any = None, expect: int = 200) -> Any:
        raw = b"" if body is None else orjson.dumps(body)
        query = ""
        if "?" in path:
            path, query = path.split("?", 1)
        environ = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "SERVER_NAME": "berth.test",
            "SERVER_PORT": "80",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(raw),
            "wsgi.errors": sys.stderr,
            "HTTP_X_AUTH_TOKEN": "admin",
            "HTTP_X_ROLES": "admin,service,member,reader",
            "HTTP_ACCEPT": "application/json",
            "HTTP_OPENSTACK_API_VERSION": VERSION,
        }
        if body is not None:
            environ["CONTENT_TYPE"] = "application/json"
            environ["CONTENT_LENGTH"] = str(len(raw))
        status: list[str] = []
        self.meter.start()
        out = b"".join(self.app(environ, lambda s, h, e=None: status.append(s)))
        self.meter.stop()
        code = int(status[0].split()[0])
        if code != expect:
            raise RuntimeError("%s %s: %s %r" % (method, path, status[0], out[:300]))
        return orjson.loads(out) if out else None


class Scenarios:
    """Each scenario: prepare (unmeasured), then one measured request."""

    def __init__(self, call: Client, url: str) -> None:
        self.call = call
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            # Compute hosts with VCPU, in uuid order; a few spare ones
            # for inventory, trait and aggregate writes.
            rows = conn.execute(
                sa.text(
                    "SELECT rp.uuid FROM resource_providers rp JOIN inventories i "
                    "ON i.resource_provider_id = rp.id JOIN resource_classes rc "
                    "ON rc.id = i.resource_class_id WHERE rc.name = 'VCPU' AND "
                    "rp.parent_provider_id IS NULL ORDER BY rp.uuid"
                )
            ).all()
        engine.dispose()
        self.hosts = [r[0] for r in rows]
        self.n = 0

    def _next_host(self) -> str:
        self.n += 1
        return self.hosts[(self.n * 7) % len(self.hosts)]

    def _gen(self, host: str) -> int:
        return int(self.call("GET", "/resource_providers/%s" % host)["generation"])

    def _claim_body(
        self, host: str, generation: int | None = None, vcpu: int = 1
    ) -> dict[str, Any]:
        return {
            "allocations": {host: {"resources": {"VCPU": vcpu, "MEMORY_MB": 256}}},
            "project_id": "p-bench",
            "user_id": "u-bench",
            "consumer_generation": generation,
            "consumer_type": "INSTANCE",
        }

    # -- the claim cycle ------------------------------------------------
    def claim_get(self) -> None:
        """GET /allocation_candidates?...&limit=5 (no write in between)."""
        self.call("GET", "/allocation_candidates?" + CANDIDATES)

    def get_usages(self) -> None:
        """GET /resource_providers/{uuid}/usages of a host (a read, issue
        24's lagging one)."""
        self.call("GET", "/resource_providers/%s/usages" % self._next_host())

    def version(self) -> None:
        """GET / (the version document): what any request costs in the
        app, the floor of every scenario above it."""
        self.call("GET", "/")

    def claim_put(self) -> None:
        """PUT /allocations/{new consumer} of a candidate."""
        self._cycle(measure_get=False)

    def claim_cycle(self) -> None:
        """Both: the candidates (bringing the cache up to date after the
        claim before) and the claim of one of them."""
        self._cycle(measure_get=True)

    def _cycle(self, measure_get: bool) -> None:
        if measure_get:
            found = self.call("GET", "/allocation_candidates?" + CANDIDATES)
        else:
            with self._quiet():
                found = self.call("GET", "/allocation_candidates?" + CANDIDATES)
        body = found["allocation_requests"][self.n % 5]
        self.n += 1
        body.update(
            project_id="p-bench",
            user_id="u-bench",
            consumer_generation=None,
            consumer_type="INSTANCE",
        )
        self.call("PUT", "/allocations/%s" % uuid.uuid4(), body, 204)

    # -- other allocation writes -----------------------------------------
    def put_allocations_move(self) -> None:
        """PUT /allocations/{existing consumer} to another host."""
        consumer = str(uuid.uuid4())
        with self._quiet():
            self.call("PUT", "/allocations/%s" % consumer, self._claim_body(self._next_host()), 204)
        self.call("PUT", "/allocations/%s" % consumer, self._claim_body(self._next_host(), 1), 204)

    def post_allocations(self) -> None:
        """POST /allocations of two new consumers."""
        body = {str(uuid.uuid4()): self._claim_body(self._next_host()) for _ in range(2)}
        self.call("POST", "/allocations", body, 204)

    def delete_allocations(self) -> None:
        """DELETE /allocations/{consumer}."""
        consumer = str(uuid.uuid4())
        with self._quiet():
            self.call("PUT", "/allocations/%s" % consumer, self._claim_body(self._next_host()), 204)
        self.call("DELETE", "/allocations/%s" % consumer, None, 204)

    # -- provider writes ----------------------------------------------------
    def put_inventories(self) -> None:
        """PUT /resource_providers/{u}/inventories (all classes)."""
        host = self._next_host()
        with self._quiet():
            current = self.call("GET", "/resource_providers/%s/inventories" % host)
        inv = current["inventories"]
        inv["VCPU"]["reserved"] = 1 - inv["VCPU"].get("reserved", 0)
        self.call(
            "PUT",
            "/resource_providers/%s/inventories" % host,
            {
                "resource_provider_generation": current["resource_provider_generation"],
                "inventories": inv,
            },
        )

    def put_inventory(self) -> None:
        """PUT /resource_providers/{u}/inventories/VCPU."""
        host = self._next_host()
        with self._quiet():
            current = self.call("GET", "/resource_providers/%s/inventories/VCPU" % host)
        current["reserved"] = 1 - current.get("reserved", 0)
        self.call("PUT", "/resource_providers/%s/inventories/VCPU" % host, current)

    def put_traits(self) -> None:
        """PUT /resource_providers/{u}/traits."""
        host = self._next_host()
        with self._quiet():
            current = self.call("GET", "/resource_providers/%s/traits" % host)
        traits = set(current["traits"]) ^ {"CUSTOM_FAST"}
        self.call(
            "PUT",
            "/resource_providers/%s/traits" % host,
            {
                "resource_provider_generation": current["resource_provider_generation"],
                "traits": sorted(traits),
            },
        )

    def put_aggregates(self) -> None:
        """PUT /resource_providers/{u}/aggregates."""
        host = self._next_host()
        with self._quiet():
            current = self.call("GET", "/resource_providers/%s/aggregates" % host)
        aggs = set(current["aggregates"]) ^ {"00000000-0000-0000-0000-00000000bea7"}
        self.call(
            "PUT",
            "/resource_providers/%s/aggregates" % host,
            {
                "resource_provider_generation": current["resource_provider_generation"],
                "aggregates": sorted(aggs),
            },
        )

    def post_resource_provider(self) -> None:
        """POST /resource_providers (a child of a host)."""
        self.call(
            "POST",
            "/resource_providers",
            {"name": "bench-%s" % uuid.uuid4(), "parent_provider_uuid": self._next_host()},
        )

    def put_resource_provider(self) -> None:
        """PUT /resource_providers/{u} (a new name)."""
        host = self._next_host()
        self.call("PUT", "/resource_providers/%s" % host, {"name": "renamed-%s" % uuid.uuid4()})

    def delete_resource_provider(self) -> None:
        """DELETE /resource_providers/{u} (a leaf with inventory)."""
        with self._quiet():
            made = self.call(
                "POST",
                "/resource_providers",
                {"name": "bench-%s" % uuid.uuid4(), "parent_provider_uuid": self._next_host()},
            )
            self.call(
                "PUT",
                "/resource_providers/%s/inventories" % made["uuid"],
                {
                    "resource_provider_generation": made["generation"],
                    "inventories": {"SRIOV_NET_VF": {"total": 8}},
                },
            )
        self.call("DELETE", "/resource_providers/%s" % made["uuid"], None, 204)

    def reshaper(self) -> None:
        """POST /reshaper: a new host's VCPU moves to a new child, with
        the allocation of its one consumer."""
        self._bulk_reshape(1)

    # -- bulk writes (issue 24, item 3: they stay proportional) -----------
    def _bulk_move(self, count: int) -> None:
        """POST /allocations moving ``count`` existing consumers, each to
        another host, in one request."""
        consumers = [str(uuid.uuid4()) for _ in range(count)]
        with self._quiet():
            self.call(
                "POST",
                "/allocations",
                {c: self._claim_body(self._next_host()) for c in consumers},
                204,
            )
        self.call(
            "POST",
            "/allocations",
            {c: self._claim_body(self._next_host(), 1) for c in consumers},
            204,
        )

    # One request carrying 1, 10 or 100 consumers.
    move_1 = functools.partialmethod(_bulk_move, 1)
    move_10 = functools.partialmethod(_bulk_move, 10)
    move_100 = functools.partialmethod(_bulk_move, 100)

    def _bulk_reshape(self, count: int) -> None:
        """POST /reshaper: a new host's VCPU moves to a new child, with
        the allocations of its ``count`` consumers."""
        consumers = [str(uuid.uuid4()) for _ in range(count)]
        vcpu, memory = max(16, 2 * count), max(4096, 512 * count)
        with self._quiet():
            host = self.call("POST", "/resource_providers", {"name": "reshape-%s" % uuid.uuid4()})[
                "uuid"
            ]
            inv = self.call(
                "PUT",
                "/resource_providers/%s/inventories" % host,
                {
                    "resource_provider_generation": 0,
                    "inventories": {"VCPU": {"total": vcpu}, "MEMORY_MB": {"total": memory}},
                },
            )
            self.call("POST", "/allocations", {c: self._claim_body(host) for c in consumers}, 204)
            child = self.call(
                "POST",
                "/resource_providers",
                {"name": "numa-%s" % uuid.uuid4(), "parent_provider_uuid": host},
            )
        self.call(
            "POST",
            "/reshaper",
            {
                "inventories": {
                    host: {
                        "resource_provider_generation": inv["resource_provider_generation"] + 1,
                        "inventories": {"MEMORY_MB": {"total": memory}},
                    },
                    child["uuid"]: {
                        "resource_provider_generation": child["generation"],
                        "inventories": {"VCPU": {"total": vcpu}},
                    },
                },
                "allocations": {
                    c: {
                        "allocations": {
                            host: {"resources": {"MEMORY_MB": 256}},
                            child["uuid"]: {"resources": {"VCPU": 1}},
                        },
                        "project_id": "p-bench",
                        "user_id": "u-bench",
                        "consumer_generation": 1,
                        "consumer_type": "INSTANCE",
                    }
                    for c in consumers
                },
            },
            204,
        )

    # One request carrying 10 or 100 consumers.
    reshape_10 = functools.partialmethod(_bulk_reshape, 10)
    reshape_100 = functools.partialmethod(_bulk_reshape, 100)

    def _quiet(self) -> Any:
        meter = self.call.meter
        scen = self

        class Quiet:
            def __enter__(self) -> None:
                scen._was = meter.on
                meter.on = False

            def __exit__(self, *exc: object) -> None:
                meter.on = scen._was

        return Quiet()


NAMES = [
    "claim_get",
    "claim_put",
    "claim_cycle",
    "put_allocations_move",
    "post_allocations",
    "delete_allocations",
    "put_inventories",
    "put_inventory",
    "put_traits",
    "put_aggregates",
    "post_resource_provider",
    "put_resource_provider",
    "delete_resource_provider",
    "reshaper",
    "get_usages",
    "version",
]
#: Not in the default run: the bulk writes, by the consumers they carry.
#: (``reshaper`` is the reshape of one consumer.)
BULK = ["move_1", "move_10", "move_100", "reshape_10", "reshape_100"]


#: With ``--gc``, the collector runs as in a server (``tune_gc``).
SERVER_GC = False


def _app(url: str) -> Any:
    conf = berth_conf.load([])
    conf.set_override("auth_strategy", "noauth2", group="api")
    conf.set_override("request_log", False, group="berth")
    observers = [tune_gc()] if SERVER_GC else []
    app = create_app(conf, Database(create_engine(url)), world_observers=observers)
    # As in a worker of ``berth serve``: one request at a time, so the
    # candidate cache brings its world up to date in place.
    preload.after_fork(app, one_at_a_time=True)
    return app


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
