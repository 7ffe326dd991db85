"""Fixtures of the functional tests (tests/README.md): those of one module
are named for what they give, so that none shadows another.
"""

from __future__ import annotations

import datetime as dt
import decimal
import logging
import os
import re
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import uuid
import uuid as uuidlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
import sqlalchemy as sa
from sqlalchemy.engine import Connection

from bench import world as bench_world
from berth.api.app import create_app
from berth.api.openapi_document import document
from berth.api.routes import ROUTES
from berth.db import connection as db_connection
from berth.db import events, setup
from berth.db import tables as t
from berth.db.engine import Database, create_engine
from berth.direct import PlacementDirect
from berth.serve import systemd
from support import campaign as cm
from support import dashboard_world as w
from support import galera_load as load
from support import servers
from support.galera import Cluster, GaleraError
from support.numbered_providers import AGG
from support.numbered_providers import uuid as numbered_uuid
from support.processes import Server, free_port, serve, stop_group, wait_ready
from tests.conftest import (
    BACKENDS,
    MYSQL_ADMIN_URL,
    PG_ADMIN_URL,
    REQUIRE,
    Client,
    _server_db,
    make_conf,
    reset,
)


# -- test_aggregate.py --------------------------------------------------------
@pytest.fixture
def rp(client: Any) -> str:
    resp = client.post("/resource_providers", json={"name": "agg-rp"})
    assert resp.status_code == 200
    return "/resource_providers/%s/aggregates" % resp.json()["uuid"]


# -- test_allocation_write_statements.py --------------------------------------
@pytest.fixture
def skip_sqlite(backend: str) -> None:
    if backend == "sqlite":
        pytest.skip("SQLite has one writer: a write never interleaves")


# -- test_allocation_candidate_cache_concurrency.py ---------------------------
@pytest.fixture(params=[2, 8], ids=["2-workers", "8-workers"])
def cache_servers(
    db_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[list[str]]:
    engine = create_engine(db_url)
    reset(engine)
    engine.dispose()
    conf = tmp_path / "placement.conf"
    conf.write_text(
        "[api]\nauth_strategy = noauth2\n"
        "[placement_database]\nconnection = %s\n"
        "[berth]\nrequest_log = false\n" % db_url
    )
    berth = Path(sys.executable).with_name("berth")
    procs, urls = [], []
    try:
        for n in range(2):
            port = free_port()
            with open(tmp_path / ("server%d.log" % n), "wb") as log:
                procs.append(
                    subprocess.Popen(
                        [
                            str(berth),
                            "serve",
                            "--config-file",
                            str(conf),
                            "--host",
                            "127.0.0.1",
                            "--port",
                            str(port),
                            "--workers",
                            str(request.param),
                        ],
                        stdout=subprocess.DEVNULL,
                        stderr=log,
                        start_new_session=True,
                    )
                )
            urls.append("http://127.0.0.1:%d" % port)
            wait_ready(urls[-1], procs[-1])
        yield urls
    finally:
        for proc in procs:
            stop_group(proc)


# -- test_claim_concurrency.py ------------------------------------------------
@pytest.fixture
def claim_server(db_url: str, tmp_path: Path) -> Iterator[tuple[str, Database]]:
    """A two-worker ``berth serve`` on a clean database; its URL and db."""
    engine = create_engine(db_url)
    reset(engine)
    conf = tmp_path / "placement.conf"
    conf.write_text(
        "[api]\nauth_strategy = noauth2\n"
        "[placement_database]\nconnection = %s\n"
        "[berth]\nrequest_log = false\n" % db_url
    )
    port = free_port()
    berth = Path(sys.executable).with_name("berth")
    with open(tmp_path / "server.log", "wb") as log:
        proc = subprocess.Popen(
            [
                str(berth),
                "serve",
                "--config-file",
                str(conf),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                "2",
            ],
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
        )
    url = "http://127.0.0.1:%d" % port
    try:
        wait_ready(url, proc)
        yield url, Database(engine)
    finally:
        stop_group(proc)
        engine.dispose()


# -- test_nova_port.py and test_client_*.py: the API in-process ---------------
@pytest.fixture
def direct(db: Database) -> Iterator[httpx.Client]:
    with PlacementDirect(make_conf(), db, latest_microversion=True) as http:
        yield http


# -- test_conf_opts.py --------------------------------------------------------
@pytest.fixture
def policy_conf(tmp_path: Path) -> dict[str, str]:
    """OS_PLACEMENT_CONFIG_DIR of a placement.conf naming a policy file
    that overrides one rule with its default and another with a change."""
    (tmp_path / "policy.yaml").write_text(
        '"placement:resource_providers:list": "rule:admin_or_service_api"\n'
        '"placement:usages": "role:admin"\n'
    )
    (tmp_path / "placement.conf").write_text(
        "[oslo_policy]\npolicy_file = %s\n" % (tmp_path / "policy.yaml")
    )
    return {"OS_PLACEMENT_CONFIG_DIR": str(tmp_path)}


# -- test_dashboard*.py -------------------------------------------------------
@pytest.fixture
def seeded(app: Any, client: Client) -> Client:
    w.seed(client)
    return client


@pytest.fixture
def browser(app: Any) -> Iterator[httpx.Client]:
    """What a browser sends: no token, no microversion, asks for HTML."""
    with httpx.Client(
        transport=httpx.WSGITransport(app=app),
        base_url="http://placement.test",
        headers={"accept": "text/html"},
    ) as c:
        yield c


# -- test_db_engine_lost_connections.py ---------------------------------------
@pytest.fixture
def server_db(db_url: str) -> Iterator[Database]:
    """A Database with a pool of its own, on a server backend."""
    if db_url.startswith("sqlite"):
        pytest.skip("SQLite has no server to drop a connection")
    engine = create_engine(db_url)
    reset(engine)
    yield Database(engine)
    engine.dispose()


# -- test_db_engine_savepoint_deadlock.py -------------------------------------
@pytest.fixture
def mysql_db(db: Database) -> Database:
    if db.backend != "mysql":
        pytest.skip(
            "whole-transaction rollback on deadlock is MySQL/MariaDB "
            "behaviour; PostgreSQL keeps the savepoint"
        )
    return db


# -- test_db_transfer_upstream.py ---------------------------------------------
@pytest.fixture(scope="module")
def upstream_venv() -> Path:
    return servers.ensure_upstream_venv()


@pytest.fixture
def new_db(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[[], str]]:
    """Make fresh empty databases of the test's backend."""
    kind = request.param
    drops: list[Callable[[], None]] = []

    def make() -> str:
        if kind == "sqlite":
            return "sqlite:///%s/%s.sqlite" % (tmp_path, uuid.uuid4().hex[:8])
        url, drop = _server_db(kind, str(tmp_path))
        drops.append(drop)
        return url

    yield make
    for drop in drops:
        drop()


# -- test_explain_and_fit.py --------------------------------------------------
@pytest.fixture
def cli_world(tmp_path: Path) -> Callable[..., str]:
    """``berth`` in-process over a SQLite database holding hosts h1 and
    h2 (4 VCPU each) in aggregate AGG: each call gives what it prints,
    or the line of the error it exits with."""
    from berth import conf as berth_conf
    from berth.cli import main
    from berth.direct import PlacementDirect

    conf = tmp_path / "placement.conf"
    conf.write_text(
        "[api]\nauth_strategy = noauth2\n[placement_database]\n"
        "connection = sqlite:///%s\n" % (tmp_path / "p.sqlite")
    )
    assert main(["db", "sync", "--config-file", str(conf)]) == 0
    with PlacementDirect(
        berth_conf.load(["--config-file", str(conf)]), microversion="latest"
    ) as http:
        for n in (1, 2):
            http.post("/resource_providers", json={"name": "h%d" % n, "uuid": numbered_uuid(n)})
            http.put(
                "/resource_providers/%s/inventories" % numbered_uuid(n),
                json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}},
            )
            http.put(
                "/resource_providers/%s/aggregates" % numbered_uuid(n),
                json={"resource_provider_generation": 1, "aggregates": [AGG]},
            )

    def run(*args: str) -> str:
        try:
            main([*args, "--config-file", str(conf)])
        except SystemExit as exc:
            return str(exc.code)
        return ""

    return run


# -- test_galera.py and test_galera_change.py ---------------------------------
@pytest.fixture(scope="session")
def galera_cluster() -> Iterator[Cluster]:
    """The running cluster. One already running (started by
    ``.ci/galera.sh``) is reused and left running; one started here is
    stopped at the end. When it cannot start the tests skip, or fail
    under ``BERTH_REQUIRE_DBS=1``."""
    require = os.environ.get("BERTH_REQUIRE_DBS") == "1"
    cluster = Cluster()
    started_here = not cluster.running()
    try:
        cluster.start()
    except (GaleraError, OSError, subprocess.SubprocessError) as exc:
        msg = "Galera cluster could not start: %s" % exc
        if require:
            pytest.fail(msg + "; BERTH_REQUIRE_DBS=1 needs it", pytrace=False)
        pytest.skip(msg)
    try:
        yield cluster
    finally:
        if started_here:
            cluster.stop()


@pytest.fixture
def galera_db(galera_cluster: Cluster) -> Iterator[list[str]]:
    """A fresh migrated database on the cluster: one URL per node."""
    with load.fresh_database(galera_cluster) as urls:
        yield urls


@pytest.fixture
def galera_nodes(galera_db: list[str]) -> Iterator[list[Client]]:
    """One in-process Berth app per node, each with its own engine."""
    dbs = [Database(create_engine(url)) for url in galera_db]
    clients = [Client(create_app(make_conf(), db)) for db in dbs]
    try:
        yield clients
    finally:
        for client, db in zip(clients, dbs, strict=True):
            client.close()
            db.engine.dispose()


# -- test_logs.py -------------------------------------------------------------
@pytest.fixture
def root_logging() -> Iterator[None]:
    """Put the root logger (pytest's handlers) back after ``logs.setup``."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {
        name: logging.getLogger(name).level for name in ("berth.request", "alembic", "sqlalchemy")
    }
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
        if handler not in handlers:
            handler.close()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    for name, value in levels.items():
        logging.getLogger(name).setLevel(value)


# -- test_memo.py -------------------------------------------------------------
@pytest.fixture
def memo_pair(db: Database) -> tuple[Client, Client]:
    kept = Client(create_app(make_conf(), db))
    fresh = Client(create_app(make_conf(berth__candidate_cache=False), db))
    return kept, fresh


# -- test_serve_deploy.py -----------------------------------------------------
@pytest.fixture
def notify_socket() -> Iterator[tuple[socket.socket, str]]:
    """A datagram socket listening as systemd's would, on an abstract
    address (``@...``, as systemd gives one to user services)."""
    name = "@berth-test-%s" % uuid.uuid4().hex
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(systemd.socket_address(name))
    yield sock, name
    sock.close()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A folder whose socket paths fit in sun_path (pytest's may not)."""
    folder = Path(tempfile.mkdtemp(prefix="berth-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


# -- test_campaign.py ---------------------------------------------------------
CONSUMER = str(uuid.uuid4())


@pytest.fixture
def campaign_world(client):
    """A provider with three inventories, a trait, an aggregate, a
    custom class and trait, and a consumer holding one VCPU."""
    c = client.at("latest")
    rp = str(uuid.uuid4())
    assert c.post("/resource_providers", json={"name": "root", "uuid": rp}).status_code == 200
    assert c.put("/resource_classes/CUSTOM_CAMPAIGN").status_code == 201
    assert c.put("/traits/CUSTOM_CAMPAIGN").status_code == 201
    r = c.put(
        cm._RP % rp + "/inventories",
        json={
            "resource_provider_generation": 0,
            "inventories": {"VCPU": cm._inv(), "MEMORY_MB": cm._inv(4096), "DISK_GB": cm._inv(100)},
        },
    )
    assert r.status_code == 200, r.text
    r = c.put(
        "/allocations/%s" % CONSUMER,
        json={
            "allocations": {rp: {"resources": {"VCPU": 1}}},
            "project_id": "proj",
            "user_id": "user",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        },
    )
    assert r.status_code == 204, r.text
    return cm.Ctx(client, rp, CONSUMER)


@pytest.fixture(scope="module")
def campaign_cases():
    """schemathesis' view of the document: one request strategy per
    operation, bodies and queries drawn from the handlers' schemas."""
    return schemathesis.openapi.from_dict(document(ROUTES))


# -- test_change_pages.py -----------------------------------------------------
#: Slots written by hand, as a three-node cluster would number them
#: (beyond any slot a test server uses).
SLOTS = (901, 902, 903)


@pytest.fixture
def before_slots(db: Database) -> Iterator[dict[int, int]]:
    """The position before the hand-made slots, which are removed after
    the test."""

    def clean(conn: Connection) -> None:
        for table, column in (
            (t.berth_events, t.berth_events.c.slot),
            (t.berth_state, t.berth_state.c.id),
        ):
            conn.execute(table.delete().where(column.in_(SLOTS)))

    db.run(clean)
    yield db.read(lambda conn: events.marks(conn)[0])
    db.run(clean)


# -- test_backup_restore.py ---------------------------------------------------
class Backend:
    """One database of one kind, with the backup and restore the docs
    give for it."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind, self.tmp = kind, tmp_path
        self.name = "berth_restore_%s" % uuidlib.uuid4().hex[:8]
        self.dump = tmp_path / "backup"
        if kind == "sqlite":
            self.path = tmp_path / "placement.sqlite"
            self.url = "sqlite:///%s" % self.path
            return
        admin = PG_ADMIN_URL if kind == "postgresql" else MYSQL_ADMIN_URL
        self.admin = sa.create_engine(admin, isolation_level="AUTOCOMMIT")
        quote = '"%s"' if kind == "postgresql" else "`%s`"
        try:
            with self.admin.connect() as conn:
                conn.execute(sa.text("CREATE DATABASE " + quote % self.name))
        except sa.exc.OperationalError as exc:
            pytest.skip("%s not reachable: %s" % (kind, exc.orig))
        self.url = (
            sa.engine.make_url(admin).set(database=self.name).render_as_string(hide_password=False)
        )
        self.server = sa.engine.make_url(admin)

    def _client(self, tool: str) -> list[str]:
        u = self.server
        return [
            tool,
            "-h",
            u.host or "127.0.0.1",
            "-P" if self.kind == "mysql" else "-p",
            str(u.port or (3306 if self.kind == "mysql" else 5432)),
            "-u" if self.kind == "mysql" else "-U",
            u.username or "",
        ]

    def backup(self) -> None:
        if self.kind == "sqlite":
            # The online backup API: a consistent copy of a live WAL
            # database (a plain cp may miss what the -wal file holds).
            with sqlite3.connect(self.path) as src, sqlite3.connect(self.dump) as dst:
                src.backup(dst)
        elif self.kind == "postgresql":
            subprocess.run(
                [*self._client("pg_dump"), "-Fc", "-f", str(self.dump), self.name],
                check=True,
                capture_output=True,
                timeout=120,
            )
        else:
            with self.dump.open("wb") as out:
                subprocess.run(
                    [
                        *self._client("mariadb-dump"),
                        "--single-transaction",
                        "--routines",
                        "--triggers",
                        "--hex-blob",
                        self.name,
                    ],
                    check=True,
                    stdout=out,
                    stderr=subprocess.PIPE,
                    timeout=120,
                )

    def restore(self) -> None:
        if self.kind == "sqlite":
            # The backup API the other way: the live file's pages are
            # replaced in place (through its WAL), so connections the
            # server holds open see the restored database.
            with sqlite3.connect(self.dump) as src, sqlite3.connect(self.path) as dst:
                src.backup(dst)
        elif self.kind == "postgresql":
            subprocess.run(
                [
                    *self._client("pg_restore"),
                    "--clean",
                    "--if-exists",
                    "--single-transaction",
                    "--no-owner",
                    "-d",
                    self.name,
                    str(self.dump),
                ],
                check=True,
                capture_output=True,
                timeout=120,
            )
        else:
            with self.dump.open("rb") as dump:
                subprocess.run(
                    [*self._client("mariadb"), self.name],
                    check=True,
                    stdin=dump,
                    capture_output=True,
                    timeout=120,
                )

    def drop(self) -> None:
        if self.kind == "sqlite":
            return
        with self.admin.connect() as conn:
            if self.kind == "postgresql":
                conn.execute(
                    sa.text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = :n AND pid <> pg_backend_pid()"
                    ),
                    {"n": self.name},
                )
                conn.execute(sa.text('DROP DATABASE IF EXISTS "%s"' % self.name))
            else:
                conn.execute(sa.text("DROP DATABASE IF EXISTS `%s`" % self.name))
        self.admin.dispose()


@pytest.fixture(params=BACKENDS)
def backup_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    found = Backend(request.param, tmp_path)
    yield found
    found.drop()


# -- test_hostile_input.py ----------------------------------------------------
RP = str(uuid.uuid4())


def snapshot(db):
    def read(conn):
        return {
            table.name: sorted(map(tuple, conn.execute(sa.select(table)).all()), key=repr)
            for table in t.metadata.sorted_tables
        }

    return db.read(read)


@pytest.fixture
def hostile_world(client, db):
    r = client.post("/resource_providers", json={"name": "rp", "uuid": RP})
    assert r.status_code == 200, r.text
    inv = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}}
    r = client.put("/resource_providers/%s/inventories" % RP, json=inv)
    assert r.status_code == 200, r.text
    return snapshot(db)


# -- test_resource_provider_tree.py -------------------------------------------
def _create(client: Any, name: str, parent: str | None = None) -> str:
    body: dict[str, Any] = {"name": name}
    if parent:
        body["parent_provider_uuid"] = parent
    resp = client.post("/resource_providers", json=body)
    assert resp.status_code == 200, resp.text
    return resp.json()["uuid"]  # type: ignore[no-any-return]


@pytest.fixture
def tree(client: Any) -> dict[str, str]:
    """root -> mid -> leaf, plus an unrelated root ``other``."""
    root = _create(client, "root")
    mid = _create(client, "mid", root)
    leaf = _create(client, "leaf", mid)
    other = _create(client, "other")
    return {"root": root, "mid": mid, "leaf": leaf, "other": other}


# -- test_db_connection*.py: the thin path of berth.db.connection -------------
#: These tests pin the shortcuts, which run only on a SQLAlchemy release
#: they were checked against; on another, test_db_connection_fallback.py
#: pins the public way every statement takes instead.
NEEDS_THIN = pytest.mark.skipif(
    not db_connection.THIN,
    reason="SQLAlchemy %s is not a release berth.db.connection's shortcuts "
    "were checked against (VERIFIED): they are off, and every statement "
    "runs SQLAlchemy's public way (test_db_connection_fallback.py)" % sa.__version__,
)


META = sa.MetaData()


# A table of this test's own, with the types whose values the database
# and SQLAlchemy's result processors shape (and NULLs of each).
PROBE = sa.Table(
    "berth_thin_probe",
    META,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(50), nullable=False),
    sa.Column("flag", sa.Boolean, nullable=True),
    sa.Column("amount", sa.Numeric(10, 2), nullable=True),
    sa.Column("ratio", sa.Float, nullable=True),
    sa.Column("at", sa.DateTime, nullable=True),
    sa.Column("note", sa.String(50), nullable=True),
)


ROWS = [
    {
        "id": 1,
        "name": "one",
        "flag": True,
        "amount": decimal.Decimal("1.50"),
        "ratio": 1.5,
        "at": dt.datetime(2026, 12, 4, 1, 2, 3),
        "note": None,
    },
    {
        "id": 2,
        "name": "two",
        "flag": False,
        "amount": decimal.Decimal("0.00"),
        "ratio": 16.0,
        "at": dt.datetime(2000, 1, 1),
        "note": "n",
    },
    {
        "id": 3,
        "name": "three",
        "flag": None,
        "amount": None,
        "ratio": None,
        "at": None,
        "note": None,
    },
]


def probe_select() -> sa.Select[Any]:
    """The statement the tests run; built once per test and reused, as a
    module's prebuilt statement is (or per call, for the normal path: a
    statement's first run is always SQLAlchemy's)."""
    return (
        sa.select(
            PROBE.c.id,
            PROBE.c.name,
            PROBE.c.flag,
            PROBE.c.amount,
            PROBE.c.ratio,
            PROBE.c.at,
            PROBE.c.note,
            (PROBE.c.id * 2).label("twice"),
        )
        .where(PROBE.c.id >= sa.bindparam("low"))
        .order_by(PROBE.c.id)
    )


@pytest.fixture
def probe(db: Database) -> Iterator[sa.Table]:
    PROBE.create(db.engine, checkfirst=True)
    try:
        with db.engine.begin() as conn:
            conn.execute(PROBE.delete())
            conn.execute(PROBE.insert(), ROWS)
        yield PROBE
    finally:
        PROBE.drop(db.engine, checkfirst=True)


def spy_contexts(
    db: Database, monkeypatch: pytest.MonkeyPatch, hook: str, position: int
) -> list[Any]:
    """What SQLAlchemy builds an execution context for, from now on
    (what a thin run does without): argument ``position`` of each call
    of the context class's constructor ``hook``."""
    seen: list[Any] = []
    base: Any = db.engine.dialect.execution_ctx_cls

    def spied(cls: Any, *args: Any, **kw: Any) -> Any:
        seen.append(args[position])
        return getattr(super(Spy, cls), hook)(*args, **kw)

    Spy = type("Spy", (base,), {hook: classmethod(spied)})
    monkeypatch.setattr(db.engine.dialect, "execution_ctx_cls", Spy)
    return seen


@pytest.fixture
def contexts(db: Database, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The statements SQLAlchemy builds an execution context for."""
    return spy_contexts(db, monkeypatch, "_init_compiled", 6)  # invoked


def outcome(fn: Callable[[], Any]) -> tuple[Any, ...]:
    """What ``fn`` returned, or the classes of what it raised."""
    try:
        return ("returned", fn())
    except Exception as exc:  # compared, not swallowed
        return ("raised", type(exc), type(getattr(exc, "orig", None)))


FORMS: dict[str, Callable[[Any], Any]] = {
    "all": lambda r: r.all(),
    "first": lambda r: r.first(),
    "one": lambda r: r.one(),
    "one_or_none": lambda r: r.one_or_none(),
    "scalar": lambda r: r.scalar(),
    "scalar_one": lambda r: r.scalar_one(),
    "scalars": lambda r: r.scalars().all(),
    "scalars_of_a_column": lambda r: r.scalars(5).all(),
    "mappings": lambda r: [dict(m) for m in r.mappings()],
    "iteration": lambda r: [tuple(row) for row in r],
    "by_name": lambda r: [
        (row.name, row.twice, row.at, row._mapping["flag"], row._mapping[PROBE.c.amount])
        for row in r
    ],
    "keys": lambda r: list(r.keys()),
    "types": lambda r: [[type(value) for value in row] for row in r],
}


def losing_the_first(db: Database, run: Callable[[Any], Any]) -> tuple[Any, int]:
    """What ``run(conn)`` in ``db.read`` returned, its first attempt's
    connection closed under it, and how many attempts it took."""
    attempts: list[int] = []

    def lose_the_first(conn: Any) -> Any:
        attempts.append(len(attempts))
        if len(attempts) == 1:
            conn.connection.driver_connection.close()
        return run(conn)

    return db.read(lose_the_first), len(attempts)


# -- test_db_connection_thin_text.py ------------------------------------------
@pytest.fixture
def no_texts(db: Database) -> None:
    """No string kept from an earlier test (the dialect outlives one)."""
    driver_texts(db).clear()


@pytest.fixture
def text_contexts(db: Database, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The driver SQL SQLAlchemy builds an execution context for."""
    return spy_contexts(db, monkeypatch, "_init_statement", 4)  # the SQL


def driver_texts(db: Database) -> dict[str, Any]:
    return getattr(db.engine.dialect, db_connection._TEXTS, {})


# -- test_bench_bulk.py -------------------------------------------------------
HOSTS, ALLOCATIONS = 40, 60
BULK_QUERIES = [
    "resources=VCPU:1,MEMORY_MB:1024,DISK_GB:10",
    "resources=VCPU:1,MEMORY_MB:1024,DISK_GB:10&required=HW_CPU_X86_AVX2,!CUSTOM_FAST",
    "resources=VCPU:1,DISK_GB:500&member_of=" + bench_world.uid("share-1"),
    (
        "resources=DISK_GB:10&resources_CPU=VCPU:2,MEMORY_MB:2048&required_CPU=HW_NUMA_ROOT"
        "&resources_NIC=SRIOV_NET_VF:1&required_NIC=CUSTOM_PHYSNET_A"
        "&same_subtree=_CPU,_NIC&group_policy=isolate"
    ),
]


def dump(client: Client, world: bench_world.World) -> dict[str, Any]:
    """Every answer a reader could get about ``world``."""
    out: dict[str, Any] = {}
    rps = client.get("/resource_providers").json()["resource_providers"]
    out["providers"] = sorted(rps, key=lambda p: p["uuid"])
    for p in out["providers"]:
        base = "/resource_providers/%s" % p["uuid"]
        for part in ("inventories", "traits", "aggregates", "usages", "allocations"):
            out[base + "/" + part] = client.get(base + "/" + part).json()
    for a in world.allocations:
        path = "/allocations/%s" % a.consumer
        out[path] = client.get(path).json()
    for n in range(5):
        path = "/usages?project_id=%s" % bench_world.uid("project-%d" % n)
        out[path] = client.get(path).json()
    for q in BULK_QUERIES:
        out[q] = client.get("/allocation_candidates?" + q).json()
    for q in ("resources=VCPU:8", "required=CUSTOM_FAST", "member_of=" + bench_world.uid("agg-3")):
        out["rp?" + q] = client.get("/resource_providers?" + q).json()
    return out


@pytest.fixture(scope="module")
def bulk_reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("api-built") / "placement.sqlite"
    engine = create_engine("sqlite:///%s" % path)
    setup.prepare(engine)
    with Client(create_app(make_conf(), Database(engine))) as client:
        world = bench_world.build(
            "http://placement.test",
            hosts=HOSTS,
            allocations=ALLOCATIONS,
            threads=1,
            transport=client._transport,
        )
        answers = dump(client, world)
    engine.dispose()
    return answers


# -- test_change_restore.py ---------------------------------------------------
RESTORE_CANDIDATES = {"resources": "VCPU:1"}


class Placement:
    """Two applications (two workers) over one SQLite database, and a
    configuration file naming it for the command line."""

    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "placement.sqlite"
        self.conf_file = tmp_path / "placement.conf"
        self.conf_file.write_text(
            "[api]\nauth_strategy = noauth2\n[placement_database]\n"
            "connection = sqlite:///%s\n" % self.path
        )
        engine = create_engine("sqlite:///%s" % self.path)
        setup.prepare(engine)
        self.db = Database(engine)
        self.workers = [Client(create_app(make_conf(), self.db)) for _ in range(2)]

    @property
    def args(self) -> list[str]:
        return ["--config-file", str(self.conf_file)]

    def position(self) -> str:
        # Past the half second a worker keeps the position it read.
        time.sleep(0.6)
        return str(self.workers[0].get("/").headers["berth-position"])

    def provider(self, name: str) -> str:
        uuid = str(uuidlib.uuid4())
        client = self.workers[0]
        assert (
            client.post("/resource_providers", json={"name": name, "uuid": uuid}).status_code == 200
        )
        assert (
            client.put(
                "/resource_providers/%s/inventories" % uuid,
                json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}},
            ).status_code
            == 200
        )
        return uuid

    def candidates(self) -> list[set[str]]:
        """Each worker's candidate providers."""
        found = []
        for client in self.workers:
            resp = client.get("/allocation_candidates", params=RESTORE_CANDIDATES)
            assert resp.status_code == 200, resp.text
            found.append(set(resp.json()["provider_summaries"]))
        return found

    def copy(self, source: Path, target: Path) -> None:
        """SQLite's online backup, as docs/install.md gives it."""
        with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
            src.backup(dst)


@pytest.fixture
def restored_placement(tmp_path: Path) -> Iterator[Placement]:
    found = Placement(tmp_path)
    yield found
    for client in found.workers:
        client.close()
    found.db.engine.dispose()


# -- test_db_migrate_grants.py ------------------------------------------------
INSTALL_DOC = Path(__file__).resolve().parents[2] / "docs" / "install.md"


#: Each backend's admin client, reading SQL on stdin, stopping at an error.
GRANT_CLIENTS = {
    "postgresql": [
        "psql",
        "-X",
        "-q",
        "-v",
        "ON_ERROR_STOP=1",
        "-h",
        "127.0.0.1",
        "-U",
        "postgres",
        "-d",
        "postgres",
    ],
    "mysql": ["mariadb", "-h", "127.0.0.1", "-u", "root"],
}


#: The first line of each backend's block in the docs.
GRANT_HEADINGS = {"postgresql": "-- PostgreSQL", "mysql": "-- MariaDB"}


def documented_sql(kind: str) -> str:
    """The ```sql block of "Setting up the database" for ``kind``."""
    text = INSTALL_DOC.read_text()
    section = text.split("### Setting up the database", 1)[1]
    section = section.split("\n### ", 1)[0]
    blocks = re.findall(r"```sql\n(.*?)```", section, re.S)
    found = [b for b in blocks if b.startswith(GRANT_HEADINGS[kind] + "\n")]
    assert len(found) == 1, "no single %r block in %s" % (GRANT_HEADINGS[kind], INSTALL_DOC)
    return str(found[0])


def fresh_names(sql: str, name: str) -> str:
    """``sql`` with the database ``placement`` and the users
    ``placement_owner`` and ``placement`` renamed ``name``,
    ``name_owner`` and ``name``: a database and users of the test's own
    on a shared server."""
    sql = re.sub(r"\bplacement_owner\b", name + "_owner", sql)
    return re.sub(r"\bplacement\b", name, sql)


def admin(kind: str, sql: str) -> None:
    """Run ``sql`` through the backend's client as its administrator."""
    client = GRANT_CLIENTS[kind]
    if shutil.which(client[0]) is None:
        msg = "%s (the %s client) is not installed" % (client[0], kind)
        if REQUIRE:
            pytest.fail(msg + "; BERTH_REQUIRE_DBS=1 needs it", pytrace=False)
        pytest.skip(msg)
    out = subprocess.run(client, input=sql, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def reachable(kind: str) -> None:
    """Skip (or fail under BERTH_REQUIRE_DBS=1) without the server."""
    url = PG_ADMIN_URL if kind == "postgresql" else MYSQL_ADMIN_URL
    engine = sa.create_engine(url)
    try:
        with engine.connect():
            pass
    except sa.exc.OperationalError as exc:
        msg = "%s server not reachable (%s)" % (kind, str(exc.orig).splitlines()[0])
        if REQUIRE:
            pytest.fail(msg + "; BERTH_REQUIRE_DBS=1 needs it", pytrace=False)
        pytest.skip(msg)
    finally:
        engine.dispose()


@pytest.fixture(params=["postgresql", "mysql"])
def documented_grants(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
    """The backend and the fresh name of a database and users made by
    the documented statements; dropped afterwards."""
    kind = request.param
    reachable(kind)
    name = "berth_grants_%s" % uuid.uuid4().hex[:8]
    admin(kind, fresh_names(documented_sql(kind), name))
    try:
        yield kind, name
    finally:
        if kind == "postgresql":
            admin(
                kind,
                (
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                    f"WHERE datname = '{name}';\nDROP DATABASE {name};\n"
                    f"DROP ROLE {name};\nDROP ROLE {name}_owner;\n"
                ),
            )
        else:
            admin(
                kind,
                f"DROP DATABASE {name};\nDROP USER '{name}'@'%';\nDROP USER '{name}_owner'@'%';\n",
            )


# -- test_db_pg_rollback.py ---------------------------------------------------
ROLLBACK_META = sa.MetaData()


ROLLBACK_PROBE = sa.Table(
    "berth_pg_rollback_probe",
    ROLLBACK_META,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
    sa.Column("name", sa.String(50), nullable=False),
)


ROLLBACK_INSERT = ROLLBACK_PROBE.insert()


@pytest.fixture
def rollback_db(db_url: str) -> Iterator[Database]:
    """A database whose pool holds one connection, so that every
    transaction runs on the same one."""
    engine = create_engine(db_url, pool_size=1, max_overflow=0)
    if engine.dialect.name != "postgresql":
        engine.dispose()
        pytest.skip("psycopg's prepared statements: PostgreSQL only")
    ROLLBACK_PROBE.create(engine, checkfirst=True)
    try:
        with engine.begin() as conn:
            conn.execute(ROLLBACK_PROBE.delete())
            conn.execute(ROLLBACK_INSERT, [{"id": 1, "name": "one"}])
        yield Database(engine)
    finally:
        ROLLBACK_PROBE.drop(engine, checkfirst=True)
        engine.dispose()


# -- test_db_urls.py ----------------------------------------------------------
#: Query arguments upstream deployments put on each backend's URL.
URL_QUERY = {
    "sqlite": "charset=utf8",
    "postgresql": "sslmode=prefer&connect_timeout=10",
    "mysql": "charset=utf8&plugin=dbcounter",
}


@pytest.fixture
def url_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str, str]]:
    kind, driver = request.param
    if kind not in BACKENDS:
        pytest.skip("BERTH_TEST_DBS leaves out %s" % kind)
    if kind == "sqlite":
        url = "sqlite:///%s" % (tmp_path / "placement.sqlite")
        drop = None
    else:
        url, drop = _server_db(kind, str(tmp_path))
    named = sa.engine.make_url(url).set(drivername=driver)
    if kind == "postgresql":
        # Trust authentication ignores it; the commands must not print it.
        named = named.set(password="s3cret")
    yield (named.render_as_string(hide_password=False) + "?" + URL_QUERY[kind], kind, driver)
    if drop is not None:
        drop()


# -- test_serve.py ------------------------------------------------------------
def start_berth(tmp_path: Path, *extra: str, env: dict[str, str] | None = None) -> Server:
    """``berth serve *extra`` in ``tmp_path``, its stderr in serve.log;
    ``env`` replaces the environment (default: this one, with the
    embedded database in ``tmp_path``)."""
    port = free_port()
    if env is None:
        env = {
            **os.environ,
            "BERTH_DATA_DIR": str(tmp_path / "data"),
            "OS_PLACEMENT_CONFIG_DIR": "",
        }
    return serve(tmp_path, port, "--port", str(port), *extra, env=env)


def stop_berth(server: Server) -> int:
    if server.proc.poll() is None:
        server.proc.send_signal(signal.SIGTERM)
    return server.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def serve_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_berth(tmp_path_factory.mktemp("serve"), "--workers", "1")
    srv.wait_log("serving Placement API")
    yield srv
    stop_berth(srv)


# -- test_wsgi_deploy.py (the deployments .ci/deploy.sh installs) -------------
REPO_ROOT = Path(__file__).resolve().parents[2]


REQUIRE_DEPLOY = os.environ.get("BERTH_REQUIRE_DEPLOY") == "1"


UWSGI = Path(sys.executable).parent / "uwsgi"


APACHE = Path("/usr/sbin/apache2")


APACHE_MODULES = Path("/usr/lib/apache2/modules")


APACHE_VENV = Path(os.environ.get("BERTH_APACHE_VENV", REPO_ROOT / ".apache-venv"))


def missing(what: str) -> None:
    """Skip (or, under ``BERTH_REQUIRE_DEPLOY=1``, fail) for ``what``."""
    msg = "%s; install with `bash .ci/deploy.sh`" % what
    if REQUIRE_DEPLOY:
        pytest.fail(msg + " (BERTH_REQUIRE_DEPLOY=1 needs it)", pytrace=False)
    pytest.skip(msg)


@pytest.fixture
def uwsgi_binary() -> Path:
    if not UWSGI.exists():
        missing("uWSGI is not installed in this venv (%s)" % UWSGI)
    return UWSGI


def _python_of_mod_wsgi() -> str:
    """The ``pythonX.Y`` Debian's mod_wsgi is linked with, or ''."""
    out = subprocess.run(
        ["ldd", str(APACHE_MODULES / "mod_wsgi.so")], capture_output=True, text=True
    )
    found = re.search(r"libpython(\d+\.\d+)", out.stdout)
    return "python" + found.group(1) if found else ""


@pytest.fixture
def apache_venv() -> Path:
    """``.apache-venv``, checked to hold the Python mod_wsgi embeds."""
    if not APACHE.exists() or not (APACHE_MODULES / "mod_wsgi.so").exists():
        missing(
            "Apache httpd or Debian's mod_wsgi is not installed "
            "(apt-get install apache2 libapache2-mod-wsgi-py3)"
        )
    if not (APACHE_VENV / "bin" / "berth").exists():
        missing("no venv of Debian's python3 with Berth at %s" % APACHE_VENV)
    embedded = _python_of_mod_wsgi()
    assert embedded and (APACHE_VENV / "lib" / embedded).is_dir(), (
        "mod_wsgi embeds %s, but %s is not a venv of it: run "
        "`bash .ci/deploy.sh` again" % (embedded or "no Python", APACHE_VENV)
    )
    return APACHE_VENV


@pytest.fixture
def apache_folder() -> Iterator[Path]:
    """A folder Apache's daemon user may use: mod_wsgi refuses to run
    Python as root, and pytest's own folders are root's alone."""
    folder = Path(tempfile.mkdtemp(prefix="berth-apache-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
