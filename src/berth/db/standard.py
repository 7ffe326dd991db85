"""The standard resource classes and traits, kept in step with the
``os-resource-classes`` and ``os-traits`` libraries (seeded by
``setup.prepare`` after every migration)."""

from __future__ import annotations

import datetime as dt

import os_resource_classes
import os_traits
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from berth.db import tables as t


def _sync_names(engine: Engine, table: sa.Table, names: list[str]) -> int:
    added = 0
    for attempt in range(5):
        with engine.begin() as conn:
            have = set(conn.scalars(sa.select(table.c.name)))
            missing = [n for n in names if n not in have]
            if not missing:
                return added
            now = dt.datetime.now(dt.UTC).replace(tzinfo=None)
            try:
                conn.execute(table.insert(), [{"name": n, "created_at": now} for n in missing])
                added += len(missing)
                return added
            except sa.exc.IntegrityError:
                # Another worker synced at the same moment; look again.
                if attempt == 4:
                    raise
    return added


def sync(engine: Engine) -> tuple[int, int]:
    """Insert any missing standard classes and traits.

    Returns how many classes and traits were added. Safe to run from many
    workers at once.
    """
    classes = _sync_names(engine, t.resource_classes, list(os_resource_classes.STANDARDS))
    traits = _sync_names(engine, t.traits, list(os_traits.get_traits()))
    return classes, traits
