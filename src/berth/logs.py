"""Logging through oslo.log, configured by ``placement.conf`` as upstream's
is: ``[DEFAULT] debug``, ``log_file``, ``log_dir``, ``use_json``,
``use_syslog``, ``log_config_append``, ``default_log_levels`` and the rest
of oslo.log's options all apply.

Berth's one difference: with no ``log_file``, ``log_dir`` or journal, lines
go to stderr (oslo.log would pick stdout), as they always have. Every
line written while a request is served carries its request id, user and
project (oslo.log's context formatter reads the request's oslo.context,
which the ``EdgeMiddleware`` and ``Context`` middlewares set). gunicorn's own lines
go through the same handlers (``berth.serve.master.GunicornLogger``), so
``berth serve`` writes one format.
"""

from __future__ import annotations

from oslo_config import cfg
from oslo_context import context as oslo_context_module
from oslo_log import log as oslo_log

#: oslo.log's product name (the ``project`` field of JSON lines).
PRODUCT = "berth"
#: Quiet by default, beyond oslo.log's own list.
EXTRA_LEVELS = ["alembic=WARN", "stevedore=WARN", "gunicorn.error=INFO"]


def set_defaults() -> None:
    """Berth's extra default log levels, on oslo.log's options."""
    levels = oslo_log.get_default_log_levels()
    missing = [pair for pair in EXTRA_LEVELS if pair not in levels]
    if missing:
        oslo_log.set_defaults(default_log_levels=levels + missing)


def register_opts(conf: cfg.ConfigOpts) -> None:
    """oslo.log's options, with Berth's extra default log levels."""
    set_defaults()
    oslo_log.register_options(conf)


def setup(conf: cfg.ConfigOpts) -> None:
    """Configure the root logger from ``conf`` (replacing its handlers)."""
    if not (conf.log_file or conf.log_dir or conf.use_journal or conf.log_config_append):
        conf.set_override("use_stderr", True)
    oslo_log.setup(conf, PRODUCT)


def request_done() -> None:
    """Forget this thread's request context, so that lines written
    between requests (a worker exiting) carry no stale request id.
    oslo.context offers no public way; its thread-local is the store."""
    oslo_context_module._request_store.__dict__.pop("context", None)
