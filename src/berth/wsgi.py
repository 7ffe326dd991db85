"""WSGI entry point for uwsgi, mod_wsgi or any WSGI server:
``berth.wsgi:application``.

Configuration comes from ``OS_PLACEMENT_CONFIG_DIR`` (its placement.conf),
else oslo.config's usual search for placement.conf.

The candidate cache's world is loaded when this module is imported
(``berth.serve.preload``). A server that imports it once and then forks its
workers (uwsgi without ``--lazy-apps``, its default) so shares one world
between them; under uwsgi each worker also forgets the connections it
inherited, and a worker that answers one request at a time (no
``--threads`` above 1, no async or gevent mode) lets its candidate cache
update its world in place rather than copy it on every write. A server
that imports it in every process (uwsgi
``--lazy-apps``, mod_wsgi) loads one world per process, at start rather
than on the first request.
"""

from __future__ import annotations

import importlib
from typing import Any

from berth import conf as berth_conf
from berth import logs
from berth.api.app import create_app
from berth.conf import check
from berth.db import setup
from berth.serve import preload
from berth.serve.memory import tune_gc

_conf = berth_conf.load([])
logs.setup(_conf)
# A Keystone setup that could validate no token fails the import (one
# line, naming the file), rather than serving a 500 for every request.
check.check_auth(_conf)
application = create_app(
    _conf, setup.database_from_conf(_conf, wait=True), world_observers=[tune_gc()]
)
preload.warm(application)

try:
    # Only inside uwsgi; called in each worker right after its fork.
    _uwsgi: Any = importlib.import_module("uwsgi")
except ImportError:
    pass
else:
    _uwsgi.post_fork_hook = lambda: preload.after_fork(
        application,
        one_at_a_time=preload.uwsgi_one_at_a_time(getattr(_uwsgi, "opt", {"threads": b"2"})),
    )
