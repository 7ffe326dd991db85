"""docs/install.md, "Setting up the database", run as written: its SQL
for PostgreSQL (through ``psql``) and MariaDB (through ``mariadb``) with
the names made fresh, then ``berth db sync`` as the owner (the two
configuration files the docs show) and the app as the runtime user,
which may read and write rows but not create a table. Covers
``berth.db.migrate`` (the migrations' needs) and what the runtime asks of
the database (``berth.db.setup.prepare``, the claim's row locks, the
change feed and PostgreSQL's notification trigger).

Needs the servers on 127.0.0.1 as ``tests/conftest.py`` does (skipping,
or failing under ``BERTH_REQUIRE_DBS=1``) and their command-line clients.
Under ``stress``: about 8 s a backend, most of it two ``berth db sync``.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa

from berth import conf as berth_conf
from berth.api.app import create_app
from berth.db import setup
from support import api_setup, processes
from tests.conftest import MYSQL_ADMIN_URL, PG_ADMIN_URL, REQUIRE, Client

pytestmark = pytest.mark.stress

DOC = Path(__file__).resolve().parents[2] / "docs" / "install.md"
#: Each backend's admin client, reading SQL on stdin, stopping at an error.
CLIENTS = {
    "postgresql": ["psql", "-X", "-q", "-v", "ON_ERROR_STOP=1",
                   "-h", "127.0.0.1", "-U", "postgres", "-d", "postgres"],
    "mysql": ["mariadb", "-h", "127.0.0.1", "-u", "root"],
}
DRIVERS = {"postgresql": "postgresql+psycopg", "mysql": "mysql+pymysql"}
#: The first line of each backend's block in the docs.
HEADINGS = {"postgresql": "-- PostgreSQL", "mysql": "-- MariaDB"}


def documented_sql(kind: str) -> str:
    """The ```sql block of "Setting up the database" for ``kind``."""
    text = DOC.read_text()
    section = text.split("### Setting up the database", 1)[1]
    section = section.split("\n### ", 1)[0]
    blocks = re.findall(r"```sql\n(.*?)```", section, re.S)
    found = [b for b in blocks if b.startswith(HEADINGS[kind] + "\n")]
    assert len(found) == 1, "no single %r block in %s" % (HEADINGS[kind], DOC)
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
    client = CLIENTS[kind]
    if shutil.which(client[0]) is None:
        msg = "%s (the %s client) is not installed" % (client[0], kind)
        if REQUIRE:
            pytest.fail(msg + "; BERTH_REQUIRE_DBS=1 needs it", pytrace=False)
        pytest.skip(msg)
    out = subprocess.run(client, input=sql, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr


def reachable(kind: str) -> None:
    """Skip (or fail under BERTH_REQUIRE_DBS=1) without the server."""
    url = PG_ADMIN_URL if kind == "postgresql" else MYSQL_ADMIN_URL
    engine = sa.create_engine(url)
    try:
        with engine.connect():
            pass
    except sa.exc.OperationalError as exc:
        msg = "%s server not reachable (%s)" % (
            kind, str(exc.orig).splitlines()[0])
        if REQUIRE:
            pytest.fail(msg + "; BERTH_REQUIRE_DBS=1 needs it", pytrace=False)
        pytest.skip(msg)
    finally:
        engine.dispose()


@pytest.fixture(params=["postgresql", "mysql"])
def documented(request: pytest.FixtureRequest) -> Iterator[tuple[str, str]]:
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
            admin(kind, (
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                f"WHERE datname = '{name}';\nDROP DATABASE {name};\n"
                f"DROP ROLE {name};\nDROP ROLE {name}_owner;\n"))
        else:
            admin(kind, f"DROP DATABASE {name};\nDROP USER '{name}'@'%';\n"
                  f"DROP USER '{name}_owner'@'%';\n")


def url(kind: str, user: str, password: str, database: str) -> str:
    return "%s://%s:%s@127.0.0.1:%d/%s" % (
        DRIVERS[kind], user, password,
        5432 if kind == "postgresql" else 3306, database)


def test_the_documented_grants_suffice(
        documented: tuple[str, str], tmp_path: Path) -> None:
    kind, name = documented
    runtime = url(kind, name, "secret", name)
    conf = tmp_path / "placement.conf"
    conf.write_text("[api]\nauth_strategy = noauth2\n"
                    "[placement_database]\nconnection = %s\n" % runtime)
    owner = tmp_path / "placement-owner.conf"
    owner.write_text("[placement_database]\nconnection = %s\n" % url(
        kind, name + "_owner", "owner-secret", name))

    # Rows only: the runtime user may not create the tables; the owner
    # may, through the second file.
    refused = processes.run("db", "sync", "--config-file", str(conf))
    assert refused.returncode != 0 and "denied" in refused.stderr, (
        refused.stderr)
    synced = processes.run("db", "sync", "--config-file", str(conf),
                           "--config-file", str(owner))
    assert synced.returncode == 0, synced.stderr

    # Serving as the runtime user: the standard classes and traits (seeded
    # at start), a provider, its inventory, a claim, candidates, the feed.
    cfg = berth_conf.load(["--config-file", str(conf)])
    db = setup.database_from_conf(cfg)
    listener = None
    if kind == "postgresql":
        listener = psycopg.connect(
            "host=127.0.0.1 user=%s password=secret dbname=%s" % (name, name),
            autocommit=True)
        listener.execute("LISTEN berth_changes")
    try:
        with Client(create_app(cfg, db)) as c:
            rp = api_setup.make_provider(c, "cn1")
            api_setup.set_inventory(c, rp, {"VCPU": 8})
            position = c.get("/resource_providers").headers[
                "Berth-Position"]
            api_setup.ok(api_setup.allocate(
                c, str(uuid.uuid4()), {rp: {"VCPU": 2}}), 204)
            found = c.get("/allocation_candidates?resources=VCPU:6").json()
            assert found["provider_summaries"][rp]["resources"][
                "VCPU"] == {"capacity": 8, "used": 2}
            feed = c.get("/berth/changes", params={"after": position})
            assert feed.status_code == 200, feed.text
            kinds = [e["kind"] for e in feed.json()["events"]]
            assert kinds == ["allocations.replaced"], kinds
        if listener is not None:
            assert list(listener.notifies(timeout=5, stop_after=1))
    finally:
        if listener is not None:
            listener.close()
        db.engine.dispose()
