"""Databases for the tests: the backends a run covers and their admin
URLs, throw-away databases on a server, a downgrade to a revision, a
snapshot of every table, and ``Backend``, one database with the backup
and restore docs/install.md gives for its kind.

``server_db`` and ``Backend`` skip the calling test when the server does
not answer (or fail it under ``BERTH_REQUIRE_DBS=1``).
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command

from berth.db import migrate
from berth.db import tables as t
from berth.db.engine import Database

PG_ADMIN_URL = os.environ.get(
    "BERTH_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
)
MYSQL_ADMIN_URL = os.environ.get("BERTH_TEST_MYSQL_URL", "mysql+pymysql://root@127.0.0.1:3306/")
BACKENDS = [
    b.strip()
    for b in os.environ.get("BERTH_TEST_DBS", "sqlite,postgresql,mysql").split(",")
    if b.strip()
]
#: ``BERTH_REQUIRE_DBS=1`` (set by .ci/run): a missing server fails the
#: test instead of skipping it.
REQUIRE = os.environ.get("BERTH_REQUIRE_DBS") == "1"


def server_db(kind: str, tmp_root: str) -> tuple[str, Any]:
    """Create a throw-away database; return its URL and a drop callback."""
    name = "berth_test_%s_%s" % (os.getpid(), uuid.uuid4().hex[:6])
    admin_url = PG_ADMIN_URL if kind == "postgresql" else MYSQL_ADMIN_URL
    try:
        admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            if kind == "postgresql":
                conn.execute(sa.text('CREATE DATABASE "%s"' % name))
            else:
                conn.execute(
                    sa.text("CREATE DATABASE `%s` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin" % name)
                )
    except sa.exc.OperationalError as exc:
        msg = (
            "%s server not reachable (%s): start one on %s (apt-get install "
            "%s), or limit the run with BERTH_TEST_DBS=sqlite"
            % (
                kind,
                str(exc.orig).splitlines()[0],
                sa.engine.make_url(admin_url).render_as_string(hide_password=True),
                "postgresql" if kind == "postgresql" else "mariadb-server",
            )
        )
        if REQUIRE:
            pytest.fail(msg + "; BERTH_REQUIRE_DBS=1 needs it", pytrace=False)
        pytest.skip(msg)
    url = sa.engine.make_url(admin_url).set(database=name)

    def drop() -> None:
        with admin.connect() as conn:
            if kind == "postgresql":
                conn.execute(
                    sa.text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = :n AND pid <> pg_backend_pid()"
                    ),
                    {"n": name},
                )
                conn.execute(sa.text('DROP DATABASE IF EXISTS "%s"' % name))
            else:
                conn.execute(sa.text("DROP DATABASE IF EXISTS `%s`" % name))
        admin.dispose()

    return url.render_as_string(hide_password=False), drop


def downgrade(engine: sa.engine.Engine, revision: str) -> None:
    """Alembic's downgrade of ``engine``'s database to ``revision``."""
    cfg = migrate._config()
    with engine.begin() as conn:
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)


def snapshot(db: Database) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table, sorted: equal before and after a
    request that must change nothing."""

    def read(conn: sa.Connection) -> dict[str, list[tuple[Any, ...]]]:
        return {
            table.name: sorted(map(tuple, conn.execute(sa.select(table)).all()), key=repr)
            for table in t.metadata.sorted_tables
        }

    return db.read(read)


class Backend:
    """One database of one kind, with the backup and restore the docs
    give for it."""

    def __init__(self, kind: str, tmp_path: Path) -> None:
        self.kind, self.tmp = kind, tmp_path
        self.name = "berth_restore_%s" % uuid.uuid4().hex[:8]
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
