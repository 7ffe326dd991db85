"""Running the WSGI app under gunicorn (``berth serve``).

gunicorn was measured against granian for this workload: see
docs/deploy.md. Each worker builds its own app and connection pool after
the fork, so no database connection is ever shared between processes.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from gunicorn.app.base import BaseApplication
from oslo_config import cfg

from berth import conf as berth_conf

LOG = logging.getLogger("berth.server")


class _Gunicorn(BaseApplication):  # type: ignore[misc]
    def __init__(self, conf: cfg.ConfigOpts, options: dict[str, Any]) -> None:
        self.conf = conf
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    def run(self) -> None:
        from berth.serving import BerthArbiter
        try:
            BerthArbiter(self).run()
        except RuntimeError as exc:
            raise SystemExit("berth: error: %s" % exc) from None

    def load(self) -> Any:
        from berth.api.app import create_app
        from berth.db.engine import Database
        from berth.db.setup import engine_from_conf
        from berth.domain.candidates.snapshot import tune_for_serving
        tune_for_serving()
        return create_app(self.conf, Database(engine_from_conf(self.conf)))


def prepare_database(conf: cfg.ConfigOpts) -> None:
    """Migrate (when asked, or in embedded mode) and seed standard data,
    once, in the master process before any worker starts."""
    from berth.db import migrate, setup
    setup.announce(conf)
    engine = setup.engine_from_conf(conf)
    setup.wait_for_database(engine, conf.placement_database.max_retries,
                            conf.placement_database.retry_interval)
    if conf.placement_database.sync_on_startup or berth_conf.is_embedded(conf):
        migrate.upgrade(engine)
    else:
        current = migrate.current_revision(engine)
        if current != migrate.head_revision():
            raise RuntimeError(
                "database is at revision %s, not %s: run `berth db sync`"
                % (current or "none", migrate.head_revision()))
        from berth.domain import standard
        standard.sync(engine)
    engine.dispose()


def run(conf: cfg.ConfigOpts, host: str, port: int,
        workers: int | None) -> int:
    if berth_conf.is_embedded(conf):
        LOG.warning("no [placement_database] connection configured: serving "
                    "an embedded SQLite database in %s with noauth2. This "
                    "mode is for local use only.", berth_conf.data_dir(conf))
        conf.set_override("auth_strategy", "noauth2", group="api")
    prepare_database(conf)
    # Import the application's modules once in the master: forked workers
    # inherit them and start serving at once (no database state is shared;
    # each worker still builds its own engine and pool in load()).
    import berth.api.app  # noqa: F401
    if workers is None:
        workers = 1 if berth_conf.is_embedded(conf) else (os.cpu_count() or 1)
    from berth.serving import gunicorn_options
    options = gunicorn_options(host, port, workers)
    _Gunicorn(conf, options).run()
    return 0
