"""Connections the database server dropped, and what a read costs.

A pooled connection can die under the server (a database restart, an
idle timeout, an operator's kill). The next request that takes it must
still succeed: on PostgreSQL the transaction runs again on a new
connection, on MariaDB/MySQL the connection is pinged on checkout.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from berth.api.app import create_app
from berth.db.engine import Database
from tests.conftest import Client, make_conf


def _own_id(conn: sa.Connection) -> int:
    query = (
        "SELECT pg_backend_pid()" if conn.dialect.name == "postgresql" else "SELECT CONNECTION_ID()"
    )
    return int(conn.exec_driver_sql(query).scalar_one())


def _kill(db: Database, conn_id: int) -> None:
    """Drop connection ``conn_id`` from the server's side."""
    admin = sa.create_engine(
        db.engine.url, poolclass=sa.pool.NullPool, isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": conn_id})
        else:
            conn.exec_driver_sql("KILL %d" % conn_id)
    admin.dispose()


def test_reads_and_writes_survive_a_dropped_connection(server_db: Database) -> None:
    client = Client(create_app(make_conf(), server_db))
    first = server_db.read(_own_id)
    _kill(server_db, first)
    # A read on the pooled (dead) connection: answered, on a new one.
    assert client.get("/traits?name=startswith:HW_CPU_X86_AVX").status_code == 200
    second = server_db.read(_own_id)
    assert second != first
    _kill(server_db, second)
    # A write too.
    assert client.put("/traits/CUSTOM_AFTER_THE_KILL").status_code == 201
    assert client.get("/traits/CUSTOM_AFTER_THE_KILL").status_code == 204
    assert server_db.retries.total == 0


def test_postgresql_reads_open_no_transaction(server_db: Database) -> None:
    if server_db.backend != "postgresql":
        pytest.skip("MariaDB/MySQL reads keep their transaction")
    from psycopg.pq import TransactionStatus

    def status(conn: sa.Connection) -> TransactionStatus:
        conn.exec_driver_sql("SELECT 1").all()
        return conn.connection.driver_connection.info.transaction_status  # type: ignore[union-attr]

    # No BEGIN and no COMMIT: the statement was its own transaction.
    assert server_db.read(status) == TransactionStatus.IDLE
    assert server_db.run(status) == TransactionStatus.INTRANS
    # ...and the connection went back to the pool ready for a write.
    assert server_db.run(status) == TransactionStatus.INTRANS


def test_a_stricter_isolation_level_keeps_its_read_transactions(server_db: Database) -> None:
    if server_db.backend != "postgresql":
        pytest.skip("MariaDB/MySQL reads keep their transaction anyway")
    from psycopg.pq import TransactionStatus

    strict = Database(server_db.engine.execution_options(isolation_level="REPEATABLE READ"))

    def level(conn: sa.Connection) -> tuple[str, TransactionStatus]:
        shown = conn.exec_driver_sql("SHOW transaction_isolation").scalar_one()
        return (str(shown), conn.connection.driver_connection.info.transaction_status)  # type: ignore[union-attr]

    assert strict.read(level) == ("repeatable read", TransactionStatus.INTRANS)
    assert server_db.read(level) == ("read committed", TransactionStatus.IDLE)
