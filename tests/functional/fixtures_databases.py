"""Fixtures of the functional tests that make databases of their own
or reach into one (tests/README.md): server-only and backend-only
databases, fresh ones, backups, the thin-path probe tables, the grants
docs/install.md gives. A plugin of tests/conftest.py (``pytest_plugins``).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from berth.db.engine import Database, create_engine
from support import databases, servers
from support.databases import (
    BACKENDS,
    MYSQL_ADMIN_URL,
    PG_ADMIN_URL,
    REQUIRE,
    Backend,
)
from support.thin_probe import (
    PROBE,
    ROLLBACK_INSERT,
    ROLLBACK_PROBE,
    ROWS,
    driver_texts,
    spy_contexts,
)
from tests.conftest import reset


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
        url, drop = databases.server_db(kind, str(tmp_path))
        drops.append(drop)
        return url

    yield make
    for drop in drops:
        drop()


# -- test_backup_restore.py ---------------------------------------------------
@pytest.fixture(params=BACKENDS)
def backup_backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    found = Backend(request.param, tmp_path)
    yield found
    found.drop()


# -- test_db_connection*.py: the thin path of berth.db.connection -------------
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


@pytest.fixture
def contexts(db: Database, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """The statements SQLAlchemy builds an execution context for."""
    return spy_contexts(db, monkeypatch, "_init_compiled", 6)  # invoked


# -- test_db_connection_thin_text.py ------------------------------------------
@pytest.fixture
def no_texts(db: Database) -> None:
    """No string kept from an earlier test (the dialect outlives one)."""
    driver_texts(db).clear()


@pytest.fixture
def text_contexts(db: Database, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The driver SQL SQLAlchemy builds an execution context for."""
    return spy_contexts(db, monkeypatch, "_init_statement", 4)  # the SQL


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
        url, drop = databases.server_db(kind, str(tmp_path))
    named = sa.engine.make_url(url).set(drivername=driver)
    if kind == "postgresql":
        # Trust authentication ignores it; the commands must not print it.
        named = named.set(password="s3cret")
    yield (named.render_as_string(hide_password=False) + "?" + URL_QUERY[kind], kind, driver)
    if drop is not None:
        drop()
