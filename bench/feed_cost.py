"""What the change feed costs a write and a read, in instructions.

    .venv/bin/python bench/feed_cost.py                  # this checkout
    PYTHONPATH=/path/to/other/src .venv/bin/python bench/feed_cost.py

Counts, under valgrind's callgrind, the instructions of whole WSGI
requests made in-process against a fresh SQLite database (the app, the
domain, SQLAlchemy and SQLite together; no server): the difference
between a run of N+1 requests and a run of 1, divided by N, so start-up
and the first request's warm-up cancel out. Instruction counts are the
same from run to run on a shared machine, where times are not. Run it
once with the feed's code and once with the code before it (another
checkout's ``src`` on ``PYTHONPATH``) and compare.

The requests:

- ``claim-new``: ``PUT /allocations/{c}`` for a new consumer (the
  commonest write: a claim);
- ``replace``: ``PUT /allocations/{c}`` for an existing consumer (a
  move or resize: the feed reads its old allocations);
- ``inventory``: ``PUT /resource_providers/{u}/inventories``;
- ``get-provider``: ``GET /resource_providers/{u}`` (every read now
  also reads the position for ``Berth-Position``).
"""

from __future__ import annotations

import argparse
import io
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import orjson

KINDS = ("claim-new", "replace", "inventory", "get-provider")
VERSION = "placement 1.39"


def _app(path: Path) -> Any:
    from berth import conf as berth_conf
    from berth.api.app import create_app
    from berth.db import setup
    from berth.db.engine import Database, create_engine

    conf = berth_conf.load([])
    conf.set_override("auth_strategy", "noauth2", group="api")
    conf.set_override("request_log", False, group="berth")
    engine = create_engine("sqlite:///%s" % path)
    setup.prepare(engine)
    return create_app(conf, Database(engine))


def _call(app: Any, method: str, url: str, body: Any = None) -> Any:
    data = b"" if body is None else orjson.dumps(body)
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": url,
        "QUERY_STRING": "",
        "SERVER_NAME": "berth.test",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(data),
        "wsgi.errors": sys.stderr,
        "CONTENT_LENGTH": str(len(data)),
        "CONTENT_TYPE": "application/json",
        "HTTP_X_AUTH_TOKEN": "admin",
        "HTTP_ACCEPT": "application/json",
        "HTTP_OPENSTACK_API_VERSION": VERSION,
    }
    status: list[str] = []
    out = b"".join(app(environ, lambda s, h, e=None: status.append(s)))
    if not status[0][:1] == "2":
        raise RuntimeError("%s %s: %s %r" % (method, url, status[0], out[:300]))
    return orjson.loads(out) if out else None


def _allocation(rp: str, generation: int | None, vcpu: int) -> dict[str, Any]:
    return {
        "allocations": {rp: {"resources": {"VCPU": vcpu}}},
        "project_id": "p",
        "user_id": "u",
        "consumer_type": "INSTANCE",
        "consumer_generation": generation,
    }


def run(kind: str, count: int) -> None:
    """``count`` requests of ``kind`` (run under valgrind)."""
    with tempfile.TemporaryDirectory() as tmp:
        app = _app(Path(tmp) / "feed.sqlite")
        rp = _call(app, "POST", "/resource_providers", {"name": "cn"})
        _call(
            app,
            "PUT",
            "/resource_providers/%s/inventories" % rp["uuid"],
            {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 100000}}},
        )
        consumer = str(uuid.uuid4())
        _call(app, "PUT", "/allocations/%s" % consumer, _allocation(rp["uuid"], None, 1))
        for i in range(count):
            if kind == "claim-new":
                _call(
                    app, "PUT", "/allocations/%s" % uuid.uuid4(), _allocation(rp["uuid"], None, 1)
                )
            elif kind == "replace":
                _call(
                    app,
                    "PUT",
                    "/allocations/%s" % consumer,
                    _allocation(rp["uuid"], i + 1, 1 + i % 2),
                )
            elif kind == "inventory":
                _call(
                    app,
                    "PUT",
                    "/resource_providers/%s/inventories" % rp["uuid"],
                    {
                        "resource_provider_generation": 2 + 2 * i,
                        "inventories": {"VCPU": {"total": 100000 + i}},
                    },
                )
                # Keep the generation arithmetic simple: one more bump.
                _call(
                    app,
                    "PUT",
                    "/resource_providers/%s/inventories" % rp["uuid"],
                    {
                        "resource_provider_generation": 3 + 2 * i,
                        "inventories": {"VCPU": {"total": 100000}},
                    },
                )
            else:
                _call(app, "GET", "/resource_providers/%s" % rp["uuid"])


def _warm(kind: str) -> None:
    """One run outside valgrind first: Python compiles the modules it
    imports (a checkout nobody ran yet) only once, and that must not be
    counted in one run and not the other."""
    subprocess.run(
        [sys.executable, __file__, "--run", kind, "--count", "1"], check=True, capture_output=True
    )


def _count(kind: str, count: int) -> int:
    out = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--run",
            kind,
            "--count",
            str(count),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    for line in out.stderr.splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1])
    raise RuntimeError(out.stderr[-500:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kinds", nargs="*", help="default: all of %s" % ", ".join(KINDS))
    ap.add_argument("--requests", type=int, default=40)
    ap.add_argument("--run", help=argparse.SUPPRESS)
    ap.add_argument("--count", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.run:
        run(args.run, args.count)
        return 0
    import berth

    print("berth from", Path(berth.__file__).parent)
    print("%-14s %s" % ("request", "instructions per request"))
    for kind in args.kinds or KINDS:
        _warm(kind)
        per = (_count(kind, args.requests + 1) - _count(kind, 1)) // args.requests
        # "inventory" makes two requests per round.
        per //= 2 if kind == "inventory" else 1
        print("%-14s %.2f M" % (kind, per / 1e6), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
