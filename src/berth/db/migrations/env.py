"""Alembic environment: runs against the connection Berth hands it."""

from __future__ import annotations

from alembic import context

from berth.db.tables import metadata

config = context.config
connection = config.attributes.get("connection")
if connection is None:  # pragma: no cover - Berth always passes one
    raise RuntimeError("run migrations through `berth db sync`")
context.configure(
    connection=connection,
    target_metadata=metadata,
    render_as_batch=connection.dialect.name == "sqlite",
    compare_type=True,
)
with context.begin_transaction():
    context.run_migrations()
