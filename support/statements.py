"""The SQL statements a block of code sends, for tests that pin them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import sqlalchemy as sa

from berth.db.engine import Database


@contextmanager
def sent(db: Database, keep: Callable[[str], bool] = lambda statement: True) -> Iterator[list[str]]:
    """The statements sent to ``db`` inside the block (cursor executions:
    an ``executemany`` is one), those ``keep`` accepts."""
    found: list[str] = []

    def note(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if keep(statement):
            found.append(statement)

    sa.event.listen(db.engine, "before_cursor_execute", note)
    try:
        yield found
    finally:
        sa.event.remove(db.engine, "before_cursor_execute", note)
