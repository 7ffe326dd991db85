"""Logging through oslo.log, configured by ``placement.conf`` as upstream's
is: ``[DEFAULT] debug``, ``log_file``, ``log_dir``, ``use_json``,
``use_syslog``, ``log_config_append``, ``default_log_levels`` and the rest
of oslo.log's options all apply.

Berth's one difference: with no ``log_file``, ``log_dir`` or journal, lines
go to stderr (oslo.log would pick stdout), as they always have. Every
line written while a request is served carries its request id, user and
project (oslo.log's context formatter reads the request's oslo.context,
which the ``Edge`` and ``Context`` middlewares set). gunicorn's own lines
go through the same handlers (``GunicornLogger``), so ``berth serve``
writes one format.
"""

from __future__ import annotations

from typing import Any

from gunicorn import glogging
from oslo_config import cfg
from oslo_context import context as oslo_context_module
from oslo_log import log as oslo_log

#: oslo.log's product name (the ``project`` field of JSON lines).
PRODUCT = "berth"
#: Quiet by default, beyond oslo.log's own list.
EXTRA_LEVELS = ["alembic=WARN", "stevedore=WARN", "gunicorn.error=INFO"]


def register_opts(conf: cfg.ConfigOpts) -> None:
    """oslo.log's options, with Berth's extra default log levels."""
    levels = oslo_log.get_default_log_levels()
    missing = [pair for pair in EXTRA_LEVELS if pair not in levels]
    if missing:
        oslo_log.set_defaults(default_log_levels=levels + missing)
    oslo_log.register_options(conf)


def setup(conf: cfg.ConfigOpts) -> None:
    """Configure the root logger from ``conf`` (replacing its handlers)."""
    if not (conf.log_file or conf.log_dir or conf.use_journal
            or conf.log_config_append):
        conf.set_override("use_stderr", True)
    oslo_log.setup(conf, PRODUCT)


def request_done() -> None:
    """Forget this thread's request context, so that lines written
    between requests (a worker exiting) carry no stale request id.
    oslo.context offers no public way; its thread-local is the store."""
    oslo_context_module._request_store.__dict__.pop("context", None)


class GunicornLogger(glogging.Logger):  # type: ignore[misc]
    """gunicorn's logger, writing through the root logger's handlers
    (oslo.log's) instead of its own, so its lines share their format and
    destination. Its access log stays off: Berth logs each request."""

    def setup(self, cfg: Any) -> None:
        # The level oslo.log gave it (default_log_levels), not gunicorn's.
        level = self.error_log.level
        super().setup(cfg)
        for log in (self.error_log, self.access_log):
            for handler in list(log.handlers):
                log.removeHandler(handler)
            log.propagate = True
        self.error_log.setLevel(level)
