"""PostgreSQL: a notification per numbered write, for the change feed.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-03

Every numbered write inserts its ``berth_changes`` rows in one statement
(``berth.db.changes.flush``); a statement trigger on that insert calls
``pg_notify`` on the channel ``berth_changes``, so that each server's
change feed, which LISTENs there (``berth.serve.watch.notify``), polls at
once instead of at its next tick. The notification is sent by the server
at the writer's commit: no statement, no round trip for the writer, and
several in one transaction are one. The change table stays the only
source of what changed; a lost notification only delays a feed until its
fallback poll. Nothing on SQLite and MySQL, which have no such thing.
"""

from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None

#: The channel; ``berth.serve.watch.notify.CHANNEL`` listens on it.
CHANNEL = "berth_changes"


def upgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    op.execute(f"""
CREATE FUNCTION berth_changes_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('{CHANNEL}', '');
    RETURN NULL;
END
$$""")
    # EXECUTE PROCEDURE: the spelling every supported version accepts.
    op.execute(
        "CREATE TRIGGER berth_changes_notify AFTER INSERT ON "
        "berth_changes FOR EACH STATEMENT EXECUTE PROCEDURE "
        "berth_changes_notify()"
    )


def downgrade() -> None:
    if op.get_context().dialect.name != "postgresql":
        return
    op.execute("DROP TRIGGER IF EXISTS berth_changes_notify ON berth_changes")
    op.execute("DROP FUNCTION IF EXISTS berth_changes_notify()")
