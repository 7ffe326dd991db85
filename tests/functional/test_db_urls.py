"""Every connection URL form upstream's ``placement.conf`` files use works:
``berth db sync`` and ``db version`` run against a real database named by
each form, and the driver that serves it is the one Berth ships."""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from berth.db import urls
from berth.db.engine import create_engine
from support.processes import run

FORMS = [
    ("sqlite", "sqlite"),
    ("sqlite", "sqlite+pysqlite"),
    ("postgresql", "postgresql"),
    ("postgresql", "postgresql+psycopg2"),
    ("mysql", "mysql"),
    ("mysql", "mysql+pymysql"),
    ("mysql", "mysql+mysqldb"),
]


@pytest.mark.parametrize("url_database", FORMS, indirect=True, ids=["%s" % d for _, d in FORMS])
def test_db_sync_with_each_url_form(url_database: tuple[str, str, str], tmp_path: Path) -> None:
    url, kind, driver = url_database
    conf = tmp_path / "placement.conf"
    conf.write_text("[placement_database]\nconnection = %s\n" % url)
    synced = run("db", "sync", "--config-file", str(conf))
    assert synced.returncode == 0, synced.stderr
    version = run("db", "version", "--config-file", str(conf))
    assert version.returncode == 0, version.stderr
    lines = version.stdout.splitlines()
    assert lines[0].startswith("database: %s://" % driver)
    assert "s3cret" not in version.stdout + synced.stdout
    if kind == "postgresql":
        assert ":***@" in lines[0] and synced.stdout.startswith(lines[0])
    current, head = lines[1].split(": ")[1], lines[2].split(": ")[1]
    assert current == head
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT COUNT(*) FROM resource_classes")).scalar_one() > 0
        shipped = {"sqlite": "pysqlite", "postgresql": "psycopg", "mysql": "pymysql"}[kind]
        assert engine.dialect.driver == shipped
    finally:
        engine.dispose()


def test_a_missing_driver_is_replaced_with_a_note() -> None:
    assert "psycopg2" not in sys.modules
    url, notes = urls.resolve("postgresql+psycopg2://placement:secret@db/placement?sslmode=require")
    assert url.drivername == "postgresql+psycopg"
    assert url.query == {"sslmode": "require"}
    assert notes == [
        "the connection URL names driver psycopg2, which is not installed: psycopg serves it"
    ]
    url, notes = urls.resolve("mysql+mysqldb://p:s@db/placement?charset=utf8")
    assert url.drivername == "mysql+pymysql" and len(notes) == 1
    url, notes = urls.resolve("mysql://p:s@db/placement")
    assert url.drivername == "mysql+pymysql" and notes == []
    url, notes = urls.resolve("postgresql+psycopg://p:s@db/placement")
    assert url.drivername == "postgresql+psycopg" and notes == []


def test_mysql_ssl_options_reach_the_driver() -> None:
    engine = create_engine(
        "mysql://p:s@db/placement?charset=utf8&ssl_ca="
        "/etc/ssl/ca.pem&ssl_cert=/c.pem&ssl_key=/k.pem"
    )
    _, kwargs = engine.dialect.create_connect_args(engine.url)
    assert kwargs["ssl"] == {"ca": "/etc/ssl/ca.pem", "cert": "/c.pem", "key": "/k.pem"}
    engine.dispose()


def test_sqlite_drops_arguments_it_does_not_take() -> None:
    url, notes = urls.resolve("sqlite:////tmp/p.sqlite?charset=utf8&timeout=5")
    assert dict(url.query) == {"timeout": "5"}
    assert notes == ["query argument(s) charset mean nothing to SQLite: ignored"]


def test_masked_hides_the_password() -> None:
    assert (
        urls.masked("mysql+pymysql://placement:s3cret@db/placement")
        == "mysql+pymysql://placement:***@db/placement"
    )


def test_start_up_logs_the_driver_once(caplog: pytest.LogCaptureFixture) -> None:
    from berth.db import setup
    from tests.conftest import make_conf

    conf = make_conf(
        placement_database__connection=(
            "postgresql+psycopg2://placement:s3cret@db.example/placement"
        )
    )
    with caplog.at_level(logging.INFO, logger="berth.db.setup"):
        shown = setup.announce(conf)
    assert shown == "postgresql+psycopg://placement:***@db.example/placement"
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0] == (
        "database: postgresql+psycopg://placement:***@db.example/placement (driver psycopg)"
    )
    assert "driver psycopg2, which is not installed" in messages[1]
    assert "s3cret" not in " ".join(messages)
