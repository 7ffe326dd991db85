"""WSGI entry point for uwsgi, mod_wsgi or any WSGI server:
``berth.wsgi:application``.

Configuration comes from ``OS_PLACEMENT_CONFIG_DIR`` (its placement.conf),
else oslo.config's usual search for placement.conf.
"""

from __future__ import annotations

import logging

from berth import conf as berth_conf
from berth.api.app import create_app
from berth.domain.candidates.snapshot import tune_for_serving
from berth.server import prepare_database

logging.basicConfig(level=logging.INFO)
_conf = berth_conf.load([])
prepare_database(_conf)
tune_for_serving()
application = create_app(_conf)
