"""Building the ``Database`` from configuration."""

from __future__ import annotations

import logging
import os
import time

import sqlalchemy as sa
from oslo_config import cfg

from berth import conf as berth_conf
from berth.db import migrate, standard, urls
from berth.db.engine import Database, create_engine

LOG = logging.getLogger(__name__)


def engine_from_conf(conf: cfg.ConfigOpts) -> sa.engine.Engine:
    """The engine of ``[placement_database] connection``.

    Raises ValueError, one line naming the option, for a URL Berth cannot
    serve (``urls.BadURL``) or a file without a connection."""
    db = conf.placement_database
    url = berth_conf.database_url(conf)
    try:
        urls.check_folder(url)
    except urls.BadURL as exc:
        raise ValueError("[placement_database] connection: %s" % exc) from None
    return create_engine(
        url,
        pool_size=db.max_pool_size,
        max_overflow=db.max_overflow,
        pool_timeout=db.pool_timeout,
        recycle=db.connection_recycle_time,
        echo=db.connection_debug >= 50,
        sqlite_synchronous=db.sqlite_synchronous,
        mysql_sql_mode=db.mysql_sql_mode,
    )


class NoDatabase(RuntimeError):
    """A command that only reads found no database: the SQLite file the
    configuration names (or the embedded one) does not exist; ``url``
    names it."""

    def __init__(self, url: sa.engine.URL) -> None:
        super().__init__(
            "there is no database at %s (run 'berth db sync' to create it)" % urls.masked(url)
        )
        self.url = url


def missing(url: sa.engine.URL) -> bool:
    """Whether ``url`` is an SQLite file that does not exist (connecting
    would create it, empty)."""
    return (
        url.get_backend_name() == "sqlite"
        and url.database not in (None, "", ":memory:")
        and url.query.get("uri") != "true"
        and not os.path.exists(url.database or "")
    )


def engine_to_read(conf: cfg.ConfigOpts) -> sa.engine.Engine:
    """``engine_from_conf`` for a command that only reads, which must
    never create a database (nor the embedded one's folder). Raises
    NoDatabase when it is an SQLite file that does not exist, and what
    ``engine_from_conf`` raises."""
    if berth_conf.is_embedded(conf):
        path = berth_conf.data_dir(conf) / "placement.sqlite"
        if not path.exists():
            raise NoDatabase(sa.engine.make_url("sqlite:///%s" % path))
    engine = engine_from_conf(conf)
    if missing(engine.url):
        engine.dispose()
        raise NoDatabase(engine.url)
    return engine


def announce(conf: cfg.ConfigOpts) -> str:
    """Log, once at start, which database and driver serve the configured
    URL and anything changed to serve it; return the URL, password masked."""
    url, notes = urls.resolve(berth_conf.database_url(conf))
    shown = urls.masked(url)
    LOG.info("database: %s (driver %s)", shown, url.get_driver_name())
    for note in notes:
        LOG.warning("[placement_database] connection: %s", note)
    return shown


#: While waiting for the database, a reminder at INFO this often (seconds);
#: each attempt is logged at DEBUG.
WAITING_REMINDER = 60.0


def wait_for_database(engine: sa.engine.Engine, retries: int, interval: int) -> None:
    """Connect once, retrying as ``[placement_database]`` asks
    (``max_retries``, -1 for ever; ``retry_interval``): one WARNING when
    the wait begins, then a reminder every ``WAITING_REMINDER`` seconds.
    Raises the last ``OperationalError`` when the retries run out."""
    attempt = 0
    where = engine.url.host or engine.url.database or str(engine.url)
    reminded = time.monotonic()
    while True:
        try:
            with engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
            if attempt:
                LOG.info("the database at %s answered after %d attempts", where, attempt + 1)
            return
        except sa.exc.OperationalError as exc:
            attempt += 1
            if retries >= 0 and attempt > retries:
                raise
            reason = first_line(exc)
            if attempt == 1:
                LOG.warning(
                    "waiting for the database at %s (retrying every %ss, %s): %s",
                    where,
                    interval,
                    "for ever" if retries < 0 else "up to %d times" % retries,
                    reason,
                )
            elif time.monotonic() - reminded >= WAITING_REMINDER:
                reminded = time.monotonic()
                LOG.info(
                    "still waiting for the database at %s (%d attempts): %s", where, attempt, reason
                )
            else:
                LOG.debug("database at %s: attempt %d: %s", where, attempt, reason)
            time.sleep(interval)


def first_line(exc: BaseException) -> str:
    """The driver's own message, once and on one line."""
    orig = getattr(exc, "orig", None) or exc
    text = str(orig).strip()
    return text.splitlines()[0] if text else type(orig).__name__


class NotMigrated(RuntimeError):
    """The database is not at the migration this release ships."""


def prepare(engine: sa.engine.Engine, *, upgrade: bool = True) -> None:
    """Make the database ready to serve: migrate it to head (``upgrade``)
    or check that it is there, then seed the standard resource classes
    and traits. The one place that decides "migrate, then seed"; safe to
    run from many processes once migrated.

    Raises ``NotMigrated`` when not upgrading and the database is behind.
    """
    if upgrade:
        migrate.upgrade(engine)
    else:
        current = migrate.current_revision(engine)
        if current != migrate.head_revision():
            raise NotMigrated(
                "database is at revision %s, not %s: run `berth db sync`"
                % (current or "none", migrate.head_revision())
            )
    standard.sync(engine)


def prepare_from_conf(
    conf: cfg.ConfigOpts, engine: sa.engine.Engine, *, wait: bool = False
) -> None:
    """``prepare`` as ``conf`` asks: migrate when ``[placement_database]
    sync_on_startup`` is set or the database is the embedded one. With
    ``wait`` (servers starting), first wait for the database as
    ``max_retries`` and ``retry_interval`` say."""
    db = conf.placement_database
    if wait:
        wait_for_database(engine, db.max_retries, db.retry_interval)
    prepare(engine, upgrade=db.sync_on_startup or berth_conf.is_embedded(conf))


def database_from_conf(conf: cfg.ConfigOpts, *, wait: bool = False) -> Database:
    """A ready (``prepare_from_conf``) database for ``[placement_database]``."""
    engine = engine_from_conf(conf)
    prepare_from_conf(conf, engine, wait=wait)
    return Database(engine)
