"""Running the WSGI app under gunicorn (``berth serve``).

gunicorn was measured against granian for this workload: see
docs/deploy.md. With the candidate cache on, the master builds the app and
loads the world before forking (``preload_app``, ``berth.preload``): the
workers share it copy-on-write and each opens its own connections after
the fork, so no database connection is ever shared between processes.
With ``[berth] candidate_cache = false`` each worker builds its own app.
"""

from __future__ import annotations

import gc
import logging
import os
from collections.abc import Callable
from typing import Any

from gunicorn.app.base import BaseApplication
from oslo_config import cfg

from berth import conf as berth_conf
from berth.domain.candidates.world_cache import Observer, Refresh

LOG = logging.getLogger("berth.server")


def tune_gc() -> Observer:
    """Garbage-collector settings for a process that serves requests:
    rarer young collections now, and the returned cache observer, which
    after each whole load of the candidate cache collects once and moves
    every live object out of the collector's view (``gc.freeze``), so that
    requests that build thousands of objects do not make the collector
    walk the world again and again. Halves the CPU of large candidate
    answers at 1,000 hosts. (Freezing never stops reference counting from
    freeing an old world.)"""
    gc.set_threshold(5000, 20, 20)
    return _freeze_after_whole_load


def _freeze_after_whole_load(done: Refresh) -> None:
    if done.kind == "whole" and done.kept:
        # Unfreeze first: whatever was frozen last time and has since
        # become cyclic garbage is collected now, not kept for ever.
        gc.unfreeze()
        gc.collect()
        gc.freeze()


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

    def reload(self) -> None:
        # SIGHUP: a preloading master builds the app and loads the world
        # again before forking new workers, so they see what the change
        # sequence cannot tell (a write made outside Berth).
        super().reload()
        self.callable = None

    def load(self) -> Any:
        from berth.api.app import create_app
        from berth.db.engine import Database
        from berth.db.setup import engine_from_conf
        # The master prepared the database (run); workers only connect.
        app = create_app(self.conf, Database(engine_from_conf(self.conf)),
                         world_observers=[tune_gc()])
        if self.cfg.preload_app:
            # In the master: every worker forks from this loaded world.
            from berth import preload
            preload.warm(app)
        return app


def prepare_database(conf: cfg.ConfigOpts) -> None:
    """Wait for the database and prepare it (migrate if asked, seed),
    once, in the master process before any worker starts."""
    from berth.db import setup
    setup.announce(conf)
    engine = setup.engine_from_conf(conf)
    setup.prepare_from_conf(conf, engine, wait=True)
    engine.dispose()


def run(conf: cfg.ConfigOpts, host: str, port: int,
        workers: int | None) -> int:
    if berth_conf.is_embedded(conf):
        LOG.warning("no [placement_database] connection configured: serving "
                    "an embedded SQLite database in %s with noauth2. This "
                    "mode is for local use only.", berth_conf.data_dir(conf))
        conf.set_override("auth_strategy", "noauth2", group="api")
    prepare_database(conf)
    from berth import metrics_server
    listen = conf.berth.metrics_listen
    if listen:
        metrics_server.parse_listen(listen)  # fail before forking
    with metrics_server.multiprocess_dir() as folder:
        return _serve(conf, host, port, workers,
                      metrics_server.gunicorn_hooks(listen, folder))


def _post_fork(server: Any, worker: Any) -> None:
    from berth import preload
    app = getattr(server.app, "callable", None)
    if app is not None:  # preloaded: the app came with the fork
        # berth.serving.EdgeWorker is a sync worker: one request at a time.
        preload.after_fork(app, one_at_a_time=True)


def _pre_fork(server: Any, worker: Any) -> None:
    from berth import preload
    app = getattr(server.app, "callable", None)
    if app is not None:
        preload.refresh(app)


def _both(first: Callable[..., Any], then: Callable[..., Any]
          ) -> Callable[..., Any]:
    """One gunicorn hook of the arbiter (``when_ready``, ``on_exit``: one
    argument, as gunicorn checks) that calls ``first``, then ``then``."""
    def hook(server: Any) -> None:
        first(server)
        then(server)
    return hook


def _serve(conf: cfg.ConfigOpts, host: str, port: int, workers: int | None,
           hooks: dict[str, Any]) -> int:
    # Import the application's modules once in the master: forked workers
    # inherit them and start serving at once (no database state is shared;
    # each worker still builds its own engine and pool in load()).
    import berth.api.app  # noqa: F401
    if workers is None:
        workers = 1 if berth_conf.is_embedded(conf) else (os.cpu_count() or 1)
    from berth.serving import gunicorn_options
    options = gunicorn_options(host, port, workers)
    # gunicorn's lines go through oslo.log's handlers (berth.logs).
    options["logger_class"] = "berth.logs.GunicornLogger"
    for name, hook in hooks.items():
        options[name] = _both(options[name], hook) if name in options else hook
    # Load the world once in the master, shared copy-on-write by every
    # worker (berth.preload); nothing to share without the cache.
    options["preload_app"] = conf.berth.candidate_cache
    options["post_fork"] = _post_fork
    if options["preload_app"]:
        # A worker replaced (for its memory, or after a crash) forks from
        # a master whose world is up to date (berth.preload.refresh).
        from berth.serving import Recycler
        options["pre_fork"] = _pre_fork
        limit = conf.berth.worker_private_memory
        if limit != 0:
            options["post_request"] = Recycler(limit)
    _Gunicorn(conf, options).run()
    return 0
