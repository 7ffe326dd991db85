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

import uuid
from pathlib import Path

import psycopg
import pytest

from berth import conf as berth_conf
from berth.api.app import create_app
from berth.db import setup
from support import api_setup, processes
from tests.conftest import Client

pytestmark = pytest.mark.stress

DRIVERS = {"postgresql": "postgresql+psycopg", "mysql": "mysql+pymysql"}


def grant_url(kind: str, user: str, password: str, database: str) -> str:
    return "%s://%s:%s@127.0.0.1:%d/%s" % (
        DRIVERS[kind],
        user,
        password,
        5432 if kind == "postgresql" else 3306,
        database,
    )


def test_the_documented_grants_suffice(documented_grants: tuple[str, str], tmp_path: Path) -> None:
    kind, name = documented_grants
    runtime = grant_url(kind, name, "secret", name)
    conf = tmp_path / "placement.conf"
    conf.write_text(
        "[api]\nauth_strategy = noauth2\n[placement_database]\nconnection = %s\n" % runtime
    )
    owner = tmp_path / "placement-owner.conf"
    owner.write_text(
        "[placement_database]\nconnection = %s\n"
        % grant_url(kind, name + "_owner", "owner-secret", name)
    )

    # Rows only: the runtime user may not create the tables; the owner
    # may, through the second file.
    refused = processes.run("db", "sync", "--config-file", str(conf))
    assert refused.returncode != 0 and "denied" in refused.stderr, refused.stderr
    synced = processes.run("db", "sync", "--config-file", str(conf), "--config-file", str(owner))
    assert synced.returncode == 0, synced.stderr

    # Serving as the runtime user: the standard classes and traits (seeded
    # at start), a provider, its inventory, a claim, candidates, the feed.
    cfg = berth_conf.load(["--config-file", str(conf)])
    db = setup.database_from_conf(cfg)
    listener = None
    if kind == "postgresql":
        listener = psycopg.connect(
            "host=127.0.0.1 user=%s password=secret dbname=%s" % (name, name), autocommit=True
        )
        listener.execute("LISTEN berth_changes")
    try:
        with Client(create_app(cfg, db)) as c:
            rp = api_setup.make_provider(c, "cn1")
            api_setup.set_inventory(c, rp, {"VCPU": 8})
            position = c.get("/resource_providers").headers["Berth-Position"]
            api_setup.ok(api_setup.allocate(c, str(uuid.uuid4()), {rp: {"VCPU": 2}}), 204)
            found = c.get("/allocation_candidates?resources=VCPU:6").json()
            assert found["provider_summaries"][rp]["resources"]["VCPU"] == {
                "capacity": 8,
                "used": 2,
            }
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
