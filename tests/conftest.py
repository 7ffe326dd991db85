"""Shared fixtures: a real database of each kind, the app, an HTTP client.

Every test that takes ``db`` (or anything built on it) runs once per
backend: SQLite always, PostgreSQL and MariaDB when their servers answer
on 127.0.0.1. Without a server those runs skip with the reason; with
``BERTH_REQUIRE_DBS=1`` (set by .ci/run) a missing server fails instead.
``BERTH_TEST_DBS=sqlite`` limits the backends.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from berth.api.app import create_app
from berth.db import setup
from berth.db import tables as t
from berth.db.engine import Database, create_engine
from support.app_client import Client, make_conf
from support.databases import BACKENDS, MYSQL_ADMIN_URL, PG_ADMIN_URL, REQUIRE
from support.databases import server_db as _server_db

# Helpers of support/ that test modules have long imported from here.
__all__ = [
    "BACKENDS",
    "MYSQL_ADMIN_URL",
    "PG_ADMIN_URL",
    "REQUIRE",
    "Client",
    "_server_db",
    "make_conf",
]

#: Fixture modules too big for one conftest.py (tests/README.md): pytest
#: takes ``pytest_plugins`` from the root conftest only.
pytest_plugins = [
    "tests.functional.fixtures_databases",
    "tests.functional.fixtures_servers",
]

# Tables holding test data, children first so deletes respect foreign keys.
DATA_TABLES = [
    t.allocations,
    t.consumers,
    t.resource_provider_traits,
    t.resource_provider_aggregates,
    t.placement_aggregates,
    t.inventories,
    t.projects,
    t.users,
    t.consumer_types,
]


@pytest.fixture(scope="session", params=BACKENDS)
def db_url(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """A migrated database URL of one backend, for the whole session."""
    kind = request.param
    if kind == "sqlite":
        path = tmp_path_factory.mktemp("sqlite") / "placement.sqlite"
        url, drop = "sqlite:///%s" % path, (lambda: None)
    else:
        url, drop = _server_db(kind, str(tmp_path_factory.getbasetemp()))
    engine = create_engine(url)
    setup.prepare(engine)
    engine.dispose()
    yield url
    drop()


def reset(engine: sa.engine.Engine) -> None:
    """Empty every data table and drop custom classes and traits."""
    import os_resource_classes
    import os_traits

    with engine.begin() as conn:
        for table in DATA_TABLES:
            conn.execute(table.delete())
        rp = t.resource_providers
        # Children before parents: null the tree links, then delete.
        conn.execute(rp.update().values(parent_provider_id=None, root_provider_id=None))
        conn.execute(rp.delete())
        conn.execute(t.traits.delete().where(t.traits.c.name.not_in(list(os_traits.get_traits()))))
        conn.execute(
            t.resource_classes.delete().where(
                t.resource_classes.c.name.not_in(list(os_resource_classes.STANDARDS))
            )
        )


#: The first words of the statements a read may send.
_READS = ("SELECT", "WITH", "SHOW")


def _guard_reads(eng: sa.engine.Engine) -> None:
    """Fail any statement that would write in a PostgreSQL read: reads
    run in autocommit there (``Database.read``), so a write in one would
    commit at once, and stay even if the request then failed."""

    @sa.event.listens_for(eng, "before_cursor_execute")
    def _check(
        conn: sa.Connection,
        cursor: Any,
        statement: str,
        parameters: Any,
        context: Any,
        executemany: bool,
    ) -> None:
        if conn.get_execution_options().get(
            "isolation_level"
        ) == "AUTOCOMMIT" and not statement.lstrip().upper().startswith(_READS):
            raise AssertionError("a read transaction wrote: %s" % statement)


@pytest.fixture(scope="session")
def engine(db_url: str) -> Iterator[sa.engine.Engine]:
    eng = create_engine(db_url)
    if eng.dialect.name == "postgresql":
        _guard_reads(eng)
    yield eng
    eng.dispose()


@pytest.fixture
def db(engine: sa.engine.Engine) -> Iterator[Database]:
    """A clean database (standard classes and traits only) for one test."""
    reset(engine)
    yield Database(engine)


@pytest.fixture
def backend(db: Database) -> str:
    return db.backend


@pytest.fixture
def conf() -> Any:
    return make_conf()


@pytest.fixture
def app(conf: Any, db: Database) -> Any:
    return create_app(conf, db)


@pytest.fixture
def client(app: Any) -> Iterator[Client]:
    with Client(app) as c:
        yield c


@pytest.fixture(scope="session")
def upstream(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    """An HTTP client of upstream Placement 16.0.0 (``.upstream-venv``,
    which ``.ci/upstream.sh`` builds; skips without it, fails instead
    with ``BERTH_REQUIRE_UPSTREAM=1``, as ``.ci/run`` sets) serving a fresh
    SQLite database for the whole session, with the headers of
    ``client``. Tests share its data: they name what they create afresh."""
    from support import servers

    if not (servers.UPSTREAM_VENV / "bin" / "gunicorn").exists():
        message = (
            "no upstream Placement venv at %s: build it with "
            ".ci/upstream.sh" % servers.UPSTREAM_VENV
        )
        if os.environ.get("BERTH_REQUIRE_UPSTREAM") == "1":
            pytest.fail(message)
        pytest.skip(message)
    server = servers.Server("upstream", tmp_path_factory.mktemp("upstream"))
    server.start()
    # No keep-alive: the server then stops at once.
    headers = {
        "x-auth-token": "admin",
        "accept": "application/json",
        "openstack-api-version": "placement latest",
        "connection": "close",
    }
    try:
        with httpx.Client(base_url=server.url, headers=headers, timeout=60) as http:
            yield http
    finally:
        server.stop()
