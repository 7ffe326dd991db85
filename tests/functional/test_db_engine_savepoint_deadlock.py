"""A deadlock inside a savepoint is retried as a whole transaction.

MariaDB and MySQL roll back the *whole* transaction when they pick it as
a deadlock victim (error 1213; a Galera certification failure surfaces
the same way). A savepoint opened before that is gone with it, so the
``ROLLBACK TO SAVEPOINT`` that leaves the savepoint block fails with 1305
("SAVEPOINT ... does not exist"). That second error used to escape
``Database.run``'s retry and became a 500. Here two real connections lock
rows in opposite order so that the deadlock strikes inside the savepoint
that ``consumers.project_id`` (``_get_or_create``) opens for its insert.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import tables as t
from berth.db.engine import Database
from berth.domain import consumer

ANCHOR = "anchor-project"
CONTESTED = "contested-project"
#: Rows the other transaction writes first, so that InnoDB, which rolls
#: back the transaction that changed less, picks ours as the victim.
BALLAST = 40


def _wait_until_blocked(db: Database, thread_id: int) -> None:
    """Poll until connection ``thread_id`` waits for a row lock."""
    query = sa.text(
        "SELECT COUNT(*) FROM information_schema.INNODB_TRX "
        "WHERE trx_mysql_thread_id = :t AND trx_state = 'LOCK WAIT'"
    )
    deadline = time.monotonic() + 20
    with db.engine.connect() as conn:
        while time.monotonic() < deadline:
            if conn.execute(query, {"t": thread_id}).scalar():
                return
            time.sleep(0.02)
    raise AssertionError("the other transaction never blocked")


def _other(
    db: Database, ready: threading.Event, thread_id: list[int], errors: list[BaseException]
) -> None:
    """Write BALLAST users and the contested project, then want the anchor."""
    try:
        with db.engine.connect() as conn:
            with conn.begin():
                thread_id.append(int(conn.execute(sa.text("SELECT CONNECTION_ID()")).scalar_one()))
                conn.execute(
                    t.users.insert(), [{"external_id": "ballast-%d" % i} for i in range(BALLAST)]
                )
                conn.execute(t.projects.insert().values(external_id=CONTESTED))
                ready.set()
                conn.execute(
                    sa.select(t.projects.c.id)
                    .where(t.projects.c.external_id == ANCHOR)
                    .with_for_update()
                )
    except BaseException as exc:  # noqa: BLE001 - reported by the test
        errors.append(exc)
        ready.set()


def test_deadlock_inside_get_or_create_savepoint_is_retried(mysql_db: Database) -> None:
    db = mysql_db
    db.run(lambda conn: conn.execute(t.projects.insert().values(external_id=ANCHOR)))
    ready = threading.Event()
    thread_id: list[int] = []
    other_errors: list[BaseException] = []
    attempts: list[int] = []
    other = threading.Thread(target=_other, args=(db, ready, thread_id, other_errors))
    retries_before = db.retries.total

    def ours(conn: Connection) -> int:
        attempts.append(1)
        conn.execute(
            sa.select(t.projects.c.id).where(t.projects.c.external_id == ANCHOR).with_for_update()
        )
        if len(attempts) == 1:
            other.start()
            assert ready.wait(20)
            _wait_until_blocked(db, thread_id[0])
        # Inside the savepoint: the INSERT waits for the other's
        # uncommitted row while the other waits for our anchor lock.
        return consumer.project_id(conn, CONTESTED)

    got = db.run(ours)
    other.join(30)
    assert not other.is_alive()
    assert other_errors == []
    assert len(attempts) == 2
    assert db.retries.total > retries_before

    def check(conn: Connection) -> Any:
        return conn.execute(
            sa.select(t.projects.c.id).where(t.projects.c.external_id == CONTESTED)
        ).scalar_one()

    assert db.read(check) == got
