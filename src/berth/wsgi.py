"""WSGI entry point for uwsgi, mod_wsgi or any WSGI server:
``berth.wsgi:application``.

Configuration comes from ``OS_PLACEMENT_CONFIG_DIR`` (its placement.conf),
else oslo.config's usual search for placement.conf.
"""

from __future__ import annotations

from berth import conf as berth_conf
from berth import logs
from berth.api.app import create_app
from berth.db import setup
from berth.server import tune_gc

_conf = berth_conf.load([])
logs.setup(_conf)
application = create_app(_conf, setup.database_from_conf(_conf, wait=True),
                         world_observers=[tune_gc()])
