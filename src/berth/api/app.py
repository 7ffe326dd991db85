"""The WSGI application: ``create_app(conf, db=None)``.

Middleware order, outermost first, and why:

0. ``Forwarded`` (oslo.middleware's ``HTTPProxyToWSGI``), only when
   ``[oslo_middleware] enable_proxy_headers_parsing`` is on, as upstream
   has it: the client's address and scheme from a proxy's
   ``Forwarded`` or ``X-Forwarded-*`` headers, before anything reads them
   (the request-log line ``EdgeMiddleware`` writes, refusals included; the absolute
   ``Location`` URLs the handlers build). Off, those headers are ignored.
1. ``EdgeMiddleware`` -- request id, the request-log line, body/URL/header limits and
   a last-resort handler, so that *every* response (even a 401 or a crash)
   has an ``x-openstack-request-id`` and a Placement-format body.
2. CORS (oslo.middleware), only when ``[cors] allowed_origin`` is set: it
   must answer pre-flight OPTIONS before authentication sees them.
3. ``/healthcheck`` without a token: the plain health answer, before
   authentication would refuse it (``healthcheck_middleware.Anonymous``).
4. Authentication: ``noauth2`` or keystonemiddleware. ``/`` and
   ``/openapi.json`` need no token.
5. Falcon: microversion parsing and the request context (``Context``
   middleware), then routing to the handlers in ``routes.py``.
"""

from __future__ import annotations

import io
import logging
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import falcon
import sqlalchemy as sa
from oslo_config import cfg
from oslo_context import context as oslo_context
from oslo_middleware import http_proxy_to_wsgi

from berth import logs
from berth.api import errors, healthcheck_middleware, microversion, render
from berth.api.handlers import dashboard
from berth.api.openapi_document import document
from berth.api.render import WSGIApp
from berth.api.routes import API, install_routes
from berth.api.views.allocation_candidate import EncodedCache
from berth.db import changes
from berth.db.engine import Database, Unavailable
from berth.domain import usage
from berth.domain.allocation_candidate.cache import CandidateCache, RefreshObserver
from berth.domain.memo import Memo
from berth.metrics import Metrics
from berth.policy import Policy

LOG = logging.getLogger("berth.api")
REQUEST_LOG = logging.getLogger("berth.request")


#: Longest URL (path, "?" and query) accepted.
MAX_URL = 8192
#: Longest header line ("Name: value") and most headers accepted, as
#: upstream deployments accept them (``berth.serve.edge`` sets gunicorn's own
#: limits to match; other servers may refuse earlier).
HEADER_LINE_LIMIT = 8190
HEADER_FIELDS = 100


#: The response header of every read: the change-sequence position the
#: answer reflects at least (docs/change-feed.md).
POSITION_HEADER = "Berth-Position"
#: Seconds one read of the position serves the header (ContextMiddleware).
POSITION_KEPT = 0.5
_READS = frozenset(("GET", "HEAD"))

#: Headers WSGI names without the HTTP_ prefix.
_BARE_HEADERS = ("CONTENT_TYPE", "CONTENT_LENGTH")


class State:
    """What every request needs: configuration, database, policy, the
    candidate cache (one per application, so one per server worker), the
    metrics, the health checks, and what the HTTP layer keeps between
    requests."""

    def __init__(
        self, conf: cfg.ConfigOpts, db: Database, world_observers: Sequence[RefreshObserver] = ()
    ) -> None:
        self.conf = conf
        self.db = db
        self.policy = Policy(conf)
        self.metrics = Metrics()
        db.observer = self.metrics.db
        db.event_retention = float(conf.berth.change_feed_retention)
        self.candidate_cache = CandidateCache(
            keep=conf.berth.candidate_cache,
            observers=[self.metrics.world_refreshed, *world_observers],
        )
        # Answers kept while the change sequence stands still (off, like
        # the candidate cache, where writers bypass the sequence).
        self.usage_memo = Memo(
            keep=conf.berth.candidate_cache, by_project=usage.brought_up_to_date, limit=10_000
        )
        self.provider_memo = Memo(keep=conf.berth.candidate_cache, by_provider=True)
        self.health = healthcheck_middleware.Checks(conf, self)
        #: Allocation-candidate queries parsed, by microversion and query
        #: string (``handlers.allocation_candidate._parsed_query``).
        self.parsed_queries: dict[tuple[object, str], Any] = {}
        #: Provider summaries and allocation requests of allocation
        #: candidates, encoded.
        self.encoded = EncodedCache()
        self._openapi: bytes | None = None

    def openapi_json(self) -> bytes:
        """The OpenAPI document of the routes table, encoded (built on
        first use: the table does not change)."""
        if self._openapi is None:
            self._openapi = render.dumps(document(API))
        return self._openapi


class ContextMiddleware:
    """Parses the microversion and builds the caller's context."""

    def __init__(self, state: State) -> None:
        self.state = state
        #: (when read, position): see :meth:`_position`.
        self._position_read: tuple[float, str | None] = (-POSITION_KEPT, None)

    def process_request(self, req: falcon.Request, resp: falcon.Response) -> None:
        ctx = req.context
        ctx.state = self.state
        ctx.request_id = req.env.get("berth.request_id")
        ctx.version = None
        headers = {"openstack-api-version": req.env.get("HTTP_OPENSTACK_API_VERSION", "")}
        if not headers["openstack-api-version"]:
            headers = {}
        try:
            ctx.version = microversion.extract(headers)
        except microversion.VersionError as exc:
            raise errors.HTTPProblem(exc.status, exc.message, extra=exc.extra) from None
        req.env["berth.microversion"] = str(ctx.version)
        ctx.auth = oslo_context.RequestContext.from_environ(req.env)
        ctx.fresh_position = None
        if req.method in _READS:
            ctx.position = self._position(ctx)
        else:  # this worker's next read says a position after the write
            self._position_read = (-POSITION_KEPT, None)

    def _position(self, ctx: Any) -> str | None:
        """A change-sequence position every read answer reflects at least
        (docs/change-feed.md), or None when the database cannot say (the
        answer itself may not need it). Any position read before the
        answer will do, so one read serves for ``POSITION_KEPT`` seconds
        or until this worker serves a write: reading it for every answer
        made a small GET markedly dearer (bench/journal/undated.md, "The
        change feed's cost"). One read during this request is kept as
        ``ctx.fresh_position``: the candidate cache takes it rather than
        reading the same row again (``CandidateCache.current``)."""
        now = time.monotonic()
        when, found = self._position_read
        if now - when < POSITION_KEPT:
            return found
        try:
            fresh = self.state.db.read(changes.current)
        except (Unavailable, sa.exc.SQLAlchemyError):
            return None
        found = str(fresh)
        ctx.fresh_position = fresh
        self._position_read = (now, found)
        return found

    def process_response(
        self, req: falcon.Request, resp: falcon.Response, resource: object, req_succeeded: bool
    ) -> None:
        position = getattr(req.context, "position", None)
        if position is not None:
            resp.set_header(POSITION_HEADER, position)
        version = getattr(req.context, "version", None)
        if version is not None:
            resp.set_header("openstack-api-version", microversion.header_value(version))
            resp.append_header("vary", "openstack-api-version")
        # The route template (never the raw URL) labels the metrics.
        req.env["berth.route"] = req.uri_template or "unmatched"
        if resp.status in (204, "204 No Content") or resp.status == 304:
            resp.content_type = None  # type: ignore[assignment]


def _handle_error(
    req: falcon.Request, resp: falcon.Response, exc: Exception, params: dict[str, Any]
) -> None:
    """The one error handler: every failure ends up in the same format
    (Falcon's own errors here, everything else as ``errors.from_exception``
    maps it, as the watch server does)."""
    if isinstance(exc, falcon.HTTPMethodNotAllowed):
        problem = errors.HTTPProblem(405, headers=dict(exc.headers or {}))
    elif isinstance(exc, falcon.HTTPError):
        problem = errors.HTTPProblem(
            exc.status_code, exc.description or "", headers=dict(exc.headers or {})
        )
    else:
        problem = errors.from_exception(
            exc, "serving %s %s" % (req.method, req.path), LOG, req.context.state.metrics
        )
    if dashboard.wants_page(req):  # a browser on a dashboard page
        dashboard.error_page(req, resp, problem)
        return
    version = getattr(req.context, "version", None)
    with_code = version is not None and microversion.at_least(version, "1.23")
    render.error(req, resp, problem, with_code=with_code)


def create_app(
    conf: cfg.ConfigOpts,
    db: Database | None = None,
    world_observers: Sequence[RefreshObserver] = (),
) -> WSGIApp:
    """Build the full WSGI stack for ``conf``.

    ``db`` defaults to a database made (and prepared) from
    ``[placement_database]``. ``world_observers`` hear of every refresh
    of the candidate cache (the serving layer tunes the garbage collector
    with one).
    """
    if db is None:
        from berth.db import setup

        db = setup.database_from_conf(conf)
    state = State(conf, db, world_observers)
    app = falcon.App(middleware=[ContextMiddleware(state)], cors_enable=False)
    app.req_options.keep_blank_qs_values = True
    app.req_options.strip_url_path_trailing_slash = False
    app.resp_options.secure_cookies_by_default = False
    # Bodiless responses (204, 201 before 1.20) carry no Content-Type, as
    # upstream; every body sets its own type.
    app.resp_options.default_media_type = None  # type: ignore[assignment]
    install_routes(app)
    # Registered for HTTPError too, or Falcon's own (more specific) default
    # handler would win and answer in its own format.
    app.add_error_handler(Exception, _handle_error)
    app.add_error_handler(falcon.HTTPError, _handle_error)
    wsgi: WSGIApp = app
    from berth.api import auth

    wsgi = auth.wrap(wsgi, conf)
    wsgi = healthcheck_middleware.Anonymous(wsgi, state.health.plain)
    if conf.cors.allowed_origin:
        from oslo_middleware import cors

        wsgi = cors.CORS(wsgi, conf)
    edge = EdgeMiddleware(wsgi, conf, state.metrics)
    edge.state = state
    if conf.oslo_middleware.enable_proxy_headers_parsing:
        return Forwarded(edge, state)
    return edge


class Forwarded(http_proxy_to_wsgi.HTTPProxyToWSGI):  # type: ignore[misc]
    """oslo.middleware's ``HTTPProxyToWSGI`` around ``EdgeMiddleware``: the client's
    address (``REMOTE_ADDR``), scheme and host from the headers of the
    proxy in front, as upstream's pipeline reads them. Keeps the
    application state where the serving layer looks for it."""

    def __init__(self, app: EdgeMiddleware, state: State) -> None:
        super().__init__(app, state.conf)
        self.state = state


#: Set in the WSGI environ, True, once the request's body (if any) was
#: read to its end: the server may then close the connection at once
#: (``berth.serve.edge``).
BODY_READ = "berth.body_read"


def _buffer_body(environ: dict[str, Any], limit: int) -> errors.HTTPProblem | None:
    """Read the whole body before the app runs, so no handler can leave
    the server waiting on an unread body. A body sent without a length
    (chunked) is read up to ``limit`` bytes and refused beyond it."""
    length = int(environ.get("CONTENT_LENGTH") or 0)
    stream: Any = environ.get("wsgi.input")
    if stream is None:
        return None
    if length > 0:
        data = stream.read(length)
        environ["wsgi.input"] = io.BytesIO(data)
        environ[BODY_READ] = len(data) == length
    elif "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower():
        data = stream.read(limit + 1)
        if len(data) > limit:
            return errors.HTTPProblem(413, "The request body is larger than %d bytes." % limit)
        environ["wsgi.input"] = io.BytesIO(data)
        environ["CONTENT_LENGTH"] = str(len(data))
        environ[BODY_READ] = True
        if data and not environ.get("CONTENT_TYPE"):
            return errors.HTTPProblem(400, "content-type header required when content-length > 0")
    else:
        environ[BODY_READ] = True
    return None


def _latin1_path(environ: dict[str, Any]) -> None:
    """Make PATH_INFO what PEP 3333 says it is, bytes as latin-1. Some
    in-process callers (httpx's WSGI transport, so berth.direct) put the
    decoded text there instead; Falcon then failed on any character beyond
    U+00FF with a 500."""
    path = environ.get("PATH_INFO", "")
    # isascii() first: a C scan, where most paths end the check.
    if not path.isascii() and any(ord(ch) > 0xFF for ch in path):
        environ["PATH_INFO"] = path.encode("utf-8", "surrogatepass").decode("latin-1")


def _tagging(
    start_response: Callable[..., Any], request_id: str, captured: dict[str, Any]
) -> Callable[..., Any]:
    """``start_response`` adding ``x-openstack-request-id`` (in place of
    any the application set) and noting the status and length in
    ``captured``, for the log line."""

    def start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
        headers = [h for h in headers if h[0].lower() != "x-openstack-request-id"]
        headers.append(("x-openstack-request-id", request_id))
        captured["status"] = status
        captured["length"] = next((v for k, v in headers if k.lower() == "content-length"), "-")
        return start_response(status, headers, exc_info)

    return start


class EdgeMiddleware:
    """Outermost layer: request ids, limits, the log line, last resort."""

    def __init__(self, app: WSGIApp, conf: cfg.ConfigOpts, metrics: Metrics) -> None:
        self.app = app
        self.max_body = conf.berth.max_body_bytes
        self.log_requests = conf.berth.request_log
        self.metrics = metrics
        #: the application state (``create_app`` sets it), for the
        #: serving layer (``berth.serve.preload``)
        self.state: State | None = None

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        started = time.monotonic()
        request_id = "req-%s" % uuid.uuid4()
        environ["berth.request_id"] = environ["openstack.request_id"] = request_id
        # This thread's current context until authentication knows the
        # caller (``ContextMiddleware`` replaces it): every log line of
        # the request, the request line included, carries its id.
        oslo_context.RequestContext(request_id=request_id)
        captured: dict[str, Any] = {}
        start = _tagging(start_response, request_id, captured)
        result = self._answer(environ, start)
        self._record(environ, captured, time.monotonic() - started)
        logs.request_done()
        return result

    def _answer(self, environ: dict[str, Any], start: Callable[..., Any]) -> Iterable[bytes]:
        """The response: a refusal of what ``_precheck`` or the body's
        buffering finds wrong, else the application's; a 500 when
        anything fails."""
        try:
            _latin1_path(environ)
            problem = self._precheck(environ)
            if problem is None:
                problem = _buffer_body(environ, self.max_body)
            if problem is not None:
                return render.error_body(environ, problem).send(start)
            return self.app(environ, start)
        except Exception:  # noqa: BLE001 - the last resort must catch all
            LOG.exception(
                "unhandled error in %s %s", environ.get("REQUEST_METHOD"), environ.get("PATH_INFO")
            )
            problem = errors.HTTPProblem(500, "An unexpected error occurred.")
            return render.error_body(environ, problem).send(start)

    def _record(self, environ: dict[str, Any], captured: dict[str, Any], elapsed: float) -> None:
        """The request's metrics and, when ``[berth] request_log`` is on,
        its log line."""
        status = captured.get("status", "-").split(" ")[0]
        self.metrics.request(
            environ.get("berth.route", "unrouted"),
            environ.get("REQUEST_METHOD", "-"),
            status,
            environ.get("berth.microversion", "-"),
            elapsed,
        )
        if self.log_requests:
            REQUEST_LOG.info(
                '%s "%s %s" status: %s len: %s microversion: %s time: %.6f',
                environ.get("REMOTE_ADDR", "-"),
                environ.get("REQUEST_METHOD"),
                environ.get("PATH_INFO", "")
                + ("?" + environ["QUERY_STRING"] if environ.get("QUERY_STRING") else ""),
                status,
                captured.get("length", "-"),
                environ.get("berth.microversion", "-"),
                elapsed,
            )

    def _precheck(self, environ: dict[str, Any]) -> errors.HTTPProblem | None:
        """Limits and framing checks that no handler should ever see fail."""
        refused: errors.HTTPProblem | None = environ.get("berth.refused")
        if refused is not None:  # the server could not read the request
            return refused
        path = environ.get("PATH_INFO", "")
        query = environ.get("QUERY_STRING", "")
        if len(path) + (len(query) + 1 if query else 0) > MAX_URL:
            return errors.HTTPProblem(414, "The URL is longer than %d characters." % MAX_URL)
        headers = [
            (k[5:] if k.startswith("HTTP_") else k, str(v))
            for k, v in environ.items()
            if k.startswith("HTTP_") or k in _BARE_HEADERS
        ]
        if len(headers) > HEADER_FIELDS or any(
            len(k) + 1 + len(v) > HEADER_LINE_LIMIT for k, v in headers
        ):
            return errors.HTTPProblem(
                431,
                "The request headers exceed %d bytes a line or %d "
                "lines." % (HEADER_LINE_LIMIT, HEADER_FIELDS),
            )
        if "\x00" in path or "%00" in query or "%00" in path:
            return errors.HTTPProblem(400, "NUL bytes are not allowed in the URL.")
        clen = environ.get("CONTENT_LENGTH")
        if clen:
            try:
                length = int(clen)
            except ValueError:
                return errors.HTTPProblem(400, "content-length header must be an integer")
            if length < 0:
                return errors.HTTPProblem(400, "content-length header must be an integer")
            if length > self.max_body:
                return errors.HTTPProblem(
                    413, "The request body is larger than %d bytes." % self.max_body
                )
            if length > 0 and not environ.get("CONTENT_TYPE"):
                return errors.HTTPProblem(
                    400, "content-type header required when content-length > 0"
                )
        return None
