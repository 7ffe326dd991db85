"""``/healthcheck``: oslo.middleware's healthcheck, with a database check.

Deployment tools already probe ``/healthcheck`` on OpenStack services, so
Berth answers there with oslo.middleware's own middleware (its bodies, its
content negotiation, its ``[healthcheck]`` options). The ``berth_database``
backend (an ``oslo.middleware.healthcheck`` entry point, enabled by
default) runs one query on the application's database.

Who sees what: a caller without a token gets the plain answer (``OK`` or
``database unavailable``, 200 or 503; HEAD 204 or 503) before
authentication runs, with no internals. A caller with a token is
authenticated; if policy ``berth:healthcheck:details`` (admin by default)
allows it, the answer is oslo.middleware's detailed one: each backend's
details (backend, latency, change sequence, candidate-cache lag or the
database error), Python and platform versions, garbage-collector counts
and thread stacks. ``[healthcheck] detailed`` is not consulted: details
depend on who asks, never on a switch that would show them to everyone.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

import webob
from oslo_config import cfg
from oslo_middleware import healthcheck
from oslo_middleware.healthcheck import pluginbase

from berth import conf as berth_conf
from berth.api.render import WSGIApp
from berth.db import changes

#: The entry point name of the database backend (see pyproject.toml).
DATABASE_BACKEND = berth_conf.HEALTHCHECK_BACKEND
PATH = "/healthcheck"


class DatabaseHealthcheck(pluginbase.HealthcheckBaseExtension):
    """Healthy when one read of the change sequence succeeds.

    oslo.middleware builds it (through stevedore) with the configuration
    only; ``Health`` then hands it the application state to check.
    """

    state: Any = None

    def healthcheck(self, server_port: int) -> pluginbase.HealthcheckResult:
        if self.state is None:
            return pluginbase.HealthcheckResult(
                False, "database unavailable", "no database to check"
            )
        db = self.state.db
        start = time.perf_counter()
        try:
            seq = db.read(changes.current)
        except Exception as exc:  # noqa: BLE001 - any failure is unhealthy
            return pluginbase.HealthcheckResult(
                False,
                "database unavailable",
                "%s: %s" % (type(exc).__name__, str(exc).splitlines()[0]),
            )
        elapsed = (time.perf_counter() - start) * 1000
        cached = self.state.candidate_cache.latest
        cache = (
            "not loaded"
            if cached is None
            else "%d changes behind" % max(0, seq.total - cached.seq.total)
        )
        return pluginbase.HealthcheckResult(
            True,
            "OK",
            "%s answered in %.1f ms; change sequence %d; "
            "candidate cache %s" % (db.backend, elapsed, seq.total, cache),
        )


class Health(healthcheck.Healthcheck):
    """oslo.middleware's healthcheck answering for one application,
    detailed or not whatever ``[healthcheck] detailed`` says."""

    def __init__(self, conf: cfg.ConfigOpts, state: Any, *, detailed: bool) -> None:
        super().__init__(None, conf)
        self._show_details = detailed
        for ext in self._backends:
            if isinstance(ext.obj, DatabaseHealthcheck):
                ext.obj.state = state

    def answer(self, environ: dict[str, Any]) -> webob.Response | None:
        """The response for this request (None when
        ``allowed_source_ranges`` or ``ignore_proxied_requests`` turn it
        away)."""
        result = self.process_request(webob.Request(environ))
        return result if isinstance(result, webob.Response) else None


class Checks:
    """The application's two healthchecks: plain and detailed."""

    def __init__(self, conf: cfg.ConfigOpts, state: Any) -> None:
        self.plain = Health(conf, state, detailed=False)
        self.detailed = Health(conf, state, detailed=True)


class Anonymous:
    """Answers GET and HEAD ``/healthcheck`` without a token, before
    authentication; everything else goes on to ``app``."""

    def __init__(self, app: WSGIApp, health: Health) -> None:
        self.app = app
        self.health = health

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        if (
            environ.get("PATH_INFO") == PATH
            and environ.get("REQUEST_METHOD") in ("GET", "HEAD")
            and not environ.get("HTTP_X_AUTH_TOKEN")
        ):
            answer = self.health.answer(environ)
            if answer is not None:
                environ["berth.route"] = PATH
                result: Iterable[bytes] = answer(environ, start_response)
                return result
        return self.app(environ, start_response)
