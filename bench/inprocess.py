"""Berth alone, in-process: where one candidate request's CPU goes.

    .venv/bin/python bench/inprocess.py                 # stage times
    .venv/bin/python bench/inprocess.py --callgrind     # instruction counts
    .venv/bin/python bench/inprocess.py --callgrind --wsgi   # whole requests
    .venv/bin/python bench/inprocess.py --db /tmp/w.sqlite simple traits
    .venv/bin/python bench/inprocess.py --explain-fit   # explain and fit
    .venv/bin/python bench/inprocess.py --url postgresql+psycopg://... \
        --callgrind --wsgi member_of sharing   # a world bulk.py wrote

Builds the benchmark deployment (``world.py``) into an SQLite file through
the WSGI app in-process (no server), or reuses ``--db`` when it exists;
``--url`` measures instead a database that holds a world already (written
by ``bulk.py``, for instance on PostgreSQL; not the explosion queries).
For each query it reports the median time of the search
(``engine.find_candidates``), of building the response body, of JSON
encoding, and of the whole WSGI call. Times on a shared machine vary by
a quarter from run to run; ``--callgrind`` instead runs the search under
valgrind and reports instructions per search, which are the same on every
run: use it to compare two versions of the engine. ``--explain-fit``
reports, per query, the median time of ``explain.explain`` and
``fit.fit`` over the cached world, and of the whole WSGI call to
/berth/explain/allocation_candidates and /berth/fit.
"""

from __future__ import annotations

import argparse
import io
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
import world as world_mod  # noqa: E402
from run import EXPLOSION, QUERIES  # noqa: E402

from berth import conf as berth_conf  # noqa: E402
from berth.api import render  # noqa: E402
from berth.api.app import create_app  # noqa: E402
from berth.api.microversion import wants  # noqa: E402
from berth.api.views.allocation_candidate import EncodedCache, serialize  # noqa: E402
from berth.db import setup  # noqa: E402
from berth.db.engine import Database, create_engine  # noqa: E402
from berth.domain.allocation_candidate import engine, explain, fit, parse  # noqa: E402
from berth.domain.allocation_candidate.cache import CandidateCache, RefreshObserver  # noqa: E402
from berth.domain.allocation_candidate.request import (  # noqa: E402
    RequestGroup,
    RequestWide,
    Settings,
)
from berth.serve.memory import tune_gc  # noqa: E402

VERSION = (1, 39)


def _query(name: str) -> str:
    if name in EXPLOSION:
        return EXPLOSION[name] + "&group_policy=none&limit=1000"
    base, _, limit = name.partition("+limit")
    return QUERIES[base] + ("&limit=%s" % limit if limit else "")


#: What is measured: an SQLite file (``--db``, the explosion world beside
#: it) or a database URL (``--url``).
Source = Path | str


def _url(db: Source, name: str = "") -> str:
    """The database URL of query ``name`` over ``db``."""
    if isinstance(db, str):
        if name in EXPLOSION:
            raise SystemExit("%s: the explosion world needs --db" % name)
        return db
    return "sqlite:///%s" % _db_for(db, name)


def _app(url: str, observers: list[RefreshObserver] | None = None) -> Any:
    conf = berth_conf.load([])
    conf.set_override("auth_strategy", "noauth2", group="api")
    conf.set_override("request_log", False, group="berth")
    engine_ = create_engine(url)
    setup.prepare(engine_)
    return create_app(conf, Database(engine_), world_observers=observers or [])


def build(path: Path, hosts: int) -> None:
    """The deployment into a new SQLite file, and the explosion tree into
    another beside it (as ``run.py`` does)."""
    world_mod.build(
        "http://berth.test", hosts=hosts, transport=httpx.WSGITransport(app=_app(_url(path)))
    )
    world_mod.build_explosion(
        "http://berth.test", transport=httpx.WSGITransport(app=_app(_url(_wide(path))))
    )


def _wide(path: Path) -> Path:
    return path.with_name(path.stem + "-wide" + path.suffix)


def _db_for(path: Path, name: str) -> Path:
    return _wide(path) if name in EXPLOSION else path


def _median_ms(fn: Callable[[], object], repeat: int) -> float:
    fn()
    times = []
    for _ in range(repeat):
        start = time.process_time()
        fn()
        times.append(time.process_time() - start)
    return statistics.median(times) * 1000


def _wsgi(app: Any, query: str, path: str = "/allocation_candidates") -> bytes:
    environ = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": path,
        "QUERY_STRING": query,
        "SERVER_NAME": "berth.test",
        "SERVER_PORT": "80",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(b""),
        "wsgi.errors": sys.stderr,
        "HTTP_X_AUTH_TOKEN": "admin",
        "HTTP_ACCEPT": "application/json",
        "HTTP_OPENSTACK_API_VERSION": "placement 1.39",
    }
    status: list[str] = []
    body = b"".join(app(environ, lambda s, h, e=None: status.append(s)))
    if not status[0].startswith("200"):
        raise RuntimeError("%s: %r" % (status[0], body[:200]))
    return body


def stages(path: Source, names: list[str], repeat: int) -> None:
    freeze = tune_gc()
    print("%-26s %9s %9s %9s %9s" % ("query (ms, median)", "search", "body", "json", "wsgi"))
    for name in names:
        print("%-26s %9.2f %9.2f %9.2f %9.2f" % ((name,) + _stage(path, name, repeat, freeze)))


def _subject(
    path: Source, name: str, freeze: RefreshObserver
) -> tuple[Any, Database, CandidateCache, str, list[RequestGroup], RequestWide]:
    """The app, database, cache, query string and parsed query of
    ``name`` over ``path``."""
    query = _query(name)
    groups, wide = parse.parse_request(parse_qsl(query), wants(VERSION))
    url = _url(path, name)
    return (
        _app(url, [freeze]),
        Database(create_engine(url)),
        CandidateCache(observers=[freeze]),
        query,
        groups,
        wide,
    )


def _stage(
    path: Source, name: str, repeat: int, freeze: RefreshObserver
) -> tuple[float, float, float, float]:
    """Median ms of the search, the body, the JSON and the WSGI call."""
    app, db, cache, query, groups, wide = _subject(path, name, freeze)
    with db.engine.connect() as conn:

        def find() -> engine.Result:
            return engine.find_candidates(conn, cache, groups, wide, Settings(), nested_aware=True)

        search_ms = _median_ms(find, repeat)
        result = find()
    summaries = EncodedCache()
    body_ms = _median_ms(lambda: serialize(result, groups, VERSION, summaries), repeat)
    body = serialize(result, groups, VERSION, summaries)
    json_ms = _median_ms(lambda: render.dumps(body), repeat)
    wsgi_ms = _median_ms(lambda: _wsgi(app, query), repeat)
    return search_ms, body_ms, json_ms, wsgi_ms


def explain_fit(path: Source, names: list[str], repeat: int) -> None:
    """Median ms of explain and fit, in the domain and through WSGI."""
    freeze = tune_gc()
    print(
        "%-26s %9s %9s %11s %9s  %s"
        % (
            "query (ms, median)",
            "explain",
            "fit",
            "explain wsgi",
            "fit wsgi",
            "excluded trees; fit total",
        )
    )
    for name in names:
        _explain_fit_row(path, name, repeat, freeze)


def _explain_fit_row(path: Source, name: str, repeat: int, freeze: RefreshObserver) -> None:
    app, db, cache, query, groups, wide = _subject(path, name, freeze)
    with db.engine.connect() as conn:
        world, specs = engine.resolve(conn, cache, groups, wide)
    report = explain.explain(world, groups, specs, wide)
    answer = fit.fit(world, specs, wide)
    ex_ms = _median_ms(lambda: explain.explain(world, groups, specs, wide), repeat)
    fit_ms = _median_ms(lambda: fit.fit(world, specs, wide), repeat)
    ex_wsgi = _median_ms(lambda: _wsgi(app, query, "/berth/explain/allocation_candidates"), repeat)
    fit_wsgi = _median_ms(lambda: _wsgi(app, query, "/berth/fit"), repeat)
    print(
        "%-26s %9.1f %9.1f %11.1f %9.1f  %d of %d; %d%s"
        % (
            name,
            ex_ms,
            fit_ms,
            ex_wsgi,
            fit_wsgi,
            len(report.excluded),
            len(report.trees),
            answer.total.placed,
            " (exact)" if answer.total.exact else " (bound %d)" % answer.total.bound,
        )
    )


def _count(path: Source, name: str, searches: int, wsgi: bool = False) -> int:
    """Instructions valgrind counts for this script doing ``searches``
    searches (or, with ``wsgi``, whole WSGI requests) of ``name``
    (start-up included)."""
    out = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--callgrind-out-file=/dev/null",
            sys.executable,
            __file__,
            "--url" if isinstance(path, str) else "--db",
            str(path),
            "--searches",
            str(searches),
            name,
        ]
        + (["--wsgi"] if wsgi else []),
        capture_output=True,
        text=True,
        check=True,
    )
    for line in out.stderr.splitlines():
        if "Collected :" in line:
            return int(line.rsplit(":", 1)[1])
    raise RuntimeError(out.stderr[-500:])


def callgrind(path: Source, names: list[str], searches: int = 10, wsgi: bool = False) -> None:
    print("%-26s %s" % ("query", "instructions per " + ("request (WSGI)" if wsgi else "search")))
    for name in names:
        per = (_count(path, name, searches + 1, wsgi) - _count(path, name, 1, wsgi)) // searches
        print("%-26s %.1f M" % (name, per / 1e6))


def _searches(path: Source, name: str, count: int, wsgi: bool) -> None:
    """Run under valgrind by ``callgrind``: ``count`` searches, or whole
    WSGI requests (search, body, JSON and the app's middleware)."""
    if wsgi:
        app = _app(_url(path, name), [tune_gc()])
        for _ in range(count):
            _wsgi(app, _query(name))
        return
    db = Database(create_engine(_url(path, name)))
    cache = CandidateCache()
    groups, wide = parse.parse_request(parse_qsl(_query(name)), wants(VERSION))
    with db.engine.connect() as conn:
        for _ in range(count):
            engine.find_candidates(conn, cache, groups, wide, Settings(), nested_aware=True)


def _measure(path: Source, names: list[str], args: argparse.Namespace) -> None:
    if args.callgrind:
        callgrind(path, names, wsgi=args.wsgi)
    elif args.explain_fit:
        explain_fit(path, [n for n in names if "+limit" not in n], min(args.repeat, 5))
    else:
        stages(path, names, args.repeat)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("queries", nargs="*", help="default: every query")
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--db", type=Path, help="SQLite file to reuse (built there if missing)")
    ap.add_argument(
        "--url", help="a database URL holding a world already (bulk.py), instead of --db"
    )
    ap.add_argument("--callgrind", action="store_true")
    ap.add_argument(
        "--wsgi", action="store_true", help="with --callgrind: count whole WSGI requests"
    )
    ap.add_argument(
        "--explain-fit", action="store_true", help="time explain and fit instead of the search"
    )
    ap.add_argument("--searches", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    names = args.queries or (
        [n + s for n in QUERIES for s in ("", "+limit50")] + ([] if args.url else list(EXPLOSION))
    )
    if args.searches is not None:
        _searches(args.url or args.db, names[0], args.searches, args.wsgi)
        return 0
    if args.url:
        _measure(args.url, names, args)
        return 0
    tmp = None
    path = args.db
    if path is None:
        tmp = tempfile.mkdtemp(prefix="berth-inprocess-")
        path = Path(tmp) / "world.sqlite"
    try:
        if not path.exists():
            start = time.time()
            build(path, args.hosts)
            print("built %d hosts in %.0fs" % (args.hosts, time.time() - start))
        _measure(path, names, args)
    finally:
        if tmp:
            shutil.rmtree(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
