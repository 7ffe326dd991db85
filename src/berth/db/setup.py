"""Building the ``Database`` from configuration."""

from __future__ import annotations

import logging
import time

import sqlalchemy as sa
from oslo_config import cfg

from berth import conf as berth_conf
from berth.db import urls
from berth.db.engine import Database, create_engine

LOG = logging.getLogger(__name__)


def engine_from_conf(conf: cfg.ConfigOpts) -> sa.engine.Engine:
    db = conf.placement_database
    return create_engine(
        berth_conf.database_url(conf), pool_size=db.max_pool_size,
        max_overflow=db.max_overflow, pool_timeout=db.pool_timeout,
        recycle=db.connection_recycle_time, echo=db.connection_debug >= 50,
        sqlite_synchronous=db.sqlite_synchronous,
        mysql_sql_mode=db.mysql_sql_mode)


def announce(conf: cfg.ConfigOpts) -> str:
    """Log, once at start, which database and driver serve the configured
    URL and anything changed to serve it; return the URL, password masked."""
    url, notes = urls.resolve(berth_conf.database_url(conf))
    shown = urls.masked(url)
    LOG.info("database: %s (driver %s)", shown, url.get_driver_name())
    for note in notes:
        LOG.warning("[placement_database] connection: %s", note)
    return shown


def wait_for_database(engine: sa.engine.Engine, retries: int,
                      interval: int) -> None:
    """Connect once, retrying as ``[placement_database]`` asks."""
    attempt = 0
    while True:
        try:
            with engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
            return
        except sa.exc.OperationalError as exc:
            attempt += 1
            if retries >= 0 and attempt > retries:
                raise
            LOG.warning("database not reachable (%s); retrying in %ss",
                        exc.orig, interval)
            time.sleep(interval)


def database_from_conf(conf: cfg.ConfigOpts) -> Database:
    """An engine for ``[placement_database]``, migrated if asked to be."""
    engine = engine_from_conf(conf)
    if conf.placement_database.sync_on_startup or berth_conf.is_embedded(conf):
        from berth.db import migrate
        migrate.upgrade(engine)
    return Database(engine)
