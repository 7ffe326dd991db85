"""The watch's HTTP side (``berth.serve.watch``): authentication as the
API's, the query and policy as ``GET /berth/changes``'s, one handler per
watcher."""

from __future__ import annotations

import asyncio
import functools
import io
import logging
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, NamedTuple, cast
from urllib.parse import parse_qsl

import orjson
from aiohttp import HttpVersion11, web
from oslo_config import cfg
from oslo_context import context as oslo_context

from berth.api import auth, errors
from berth.api import util as api_util
from berth.api.schemas import change as schema
from berth.db import events
from berth.db.engine import Database
from berth.domain import change
from berth.metrics import Metrics
from berth.policy import Policy
from berth.position import Position
from berth.serve.watch.feed import (
    JSONL,
    PATH,
    SSE,
    Feed,
    Watcher,
    entries,
    frames,
)

LOG = logging.getLogger("berth.server")


class Refusal(NamedTuple):
    """An answer in the Placement error format, instead of a stream."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


class Ask(NamedTuple):
    """An authorized watch: its filters and the first page."""

    filters: events.Filters
    tree: tuple[str, ...] | None
    page: events.EventPage
    after: Position


class Gate:
    """Authentication exactly as the API's (``auth.wrap``), then the
    query, the policy narrowing and the first page, as ``GET
    /berth/changes`` answers them. Blocking: run in a thread."""

    def __init__(
        self, conf: cfg.ConfigOpts, db: Database, policy: Policy, metrics: Metrics
    ) -> None:
        self.db, self.policy, self.metrics = db, policy, metrics
        self.app = auth.wrap(self._inner, conf)

    def __call__(self, environ: dict[str, Any]) -> Refusal | Ask:
        said: dict[str, Any] = {}

        def start(
            status: str, headers: list[tuple[str, str]], exc_info: Any = None
        ) -> Callable[[bytes], None]:
            said["status"], said["headers"] = status, headers
            return lambda data: None

        body = b"".join(self.app(environ, start))
        ask: Ask | None = environ.get("berth.watch")
        if ask is not None:
            return ask
        return Refusal(int(said["status"].split(" ")[0]), said["headers"], body)

    def _inner(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        try:
            environ["berth.watch"] = self._ask(environ)
            start_response("200 OK", [])
            return [b""]
        except Exception as exc:  # noqa: BLE001 - every refusal in format
            rid = environ["berth.request_id"]
            # The app's one mapping, and its conflict count, into the
            # metrics every process of ``berth serve`` adds up. (Not the
            # app's request count and latency: a watch lasts as long as
            # its stream; the feed's own metrics describe watches.)
            problem = errors.from_exception(exc, "starting a watch (%s)" % rid, LOG, self.metrics)
            # ``code`` always: the watch has no microversions, and answers
            # as the API does from 1.23.
            body = orjson.dumps(problem.to_dict(rid, with_code=True, method="GET"))
            start_response(
                "%d %s" % (problem.status, errors.STATUS_TEXT.get(problem.status, ("Error",))[0]),
                [("Content-Type", "application/json"), *problem.headers.items()],
            )
            return [body]

    def _ask(self, environ: dict[str, Any]) -> Ask:
        ctx = oslo_context.RequestContext.from_environ(environ)
        pairs = [
            (k, v)
            for k, v in parse_qsl(environ.get("QUERY_STRING", ""), keep_blank_values=True)
            if k != "format"
        ]
        resume = environ.get("HTTP_LAST_EVENT_ID")
        if resume:  # an EventSource reconnecting: its last event's id
            pairs = [(k, v) for k, v in pairs if k != "after"]
            pairs.append(("after", resume))
        params = api_util.query_dict(api_util.validate_pairs(pairs, schema.QUERY))
        if params["after"] == "now":  # the watch's own: from here on
            params["after"] = str(self.db.read(events.marks)[0])
        filters, tree, limit = schema.feed_query(
            params,
            lambda project: self.policy.authorize(
                ctx, schema.POLICY, {"project_id": project, "user_id": None}
            ),
        )
        page = self.db.read(
            functools.partial(
                change.read_feed, after=params["after"], filters=filters, trees=tree, limit=limit
            )
        )
        return Ask(filters, tree, page, change.parse_position(params["after"]))


def _format(request: web.Request) -> str | None:
    """The frames asked for: ``format=sse|jsonl``, else by Accept."""
    asked = request.query.get("format")
    if asked is not None:
        return {"sse": SSE, "jsonl": JSONL}.get(asked)
    accept = request.headers.get("Accept", "")
    return SSE if SSE in accept else JSONL


def _environ(request: web.Request, request_id: str) -> dict[str, Any]:
    """A WSGI environ of ``request`` for the authentication middleware
    (its errors always JSON, whatever frames were asked for)."""
    environ: dict[str, Any] = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": request.path,
        "SCRIPT_NAME": "",
        "QUERY_STRING": request.query_string,
        "SERVER_NAME": request.host.rpartition(":")[0] or request.host,
        "SERVER_PORT": "0",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": request.remote or "",
        "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(),
        "wsgi.errors": io.StringIO(),
        "berth.request_id": request_id,
        "openstack.request_id": request_id,
    }
    for name, value in request.headers.items():
        key = name.upper().replace("-", "_")
        if key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            environ[key] = value
        else:
            environ["HTTP_" + key] = value
    environ["HTTP_ACCEPT"] = "application/json"
    return environ


def _problem(status: int, detail: str, request_id: str) -> web.Response:
    body = orjson.dumps(
        errors.HTTPProblem(status, detail).to_dict(request_id, with_code=True, method="GET")
    )
    return web.Response(
        status=status,
        body=body,
        content_type="application/json",
        headers={"x-openstack-request-id": request_id},
    )


class Stalled(Exception):
    """A watcher read nothing of a write for ``[berth]
    watch_drain_timeout`` seconds."""


class Server:
    """The aiohttp side: one handler per watcher.

    A client that stops reading holds its connection's buffer and socket
    until the connection closes, and the connection of a stream that has
    ended cannot close while its buffer holds bytes (aiohttp waits for
    them to go out, the kernel keeps the socket): so whatever a client
    has not read ``drain`` seconds after its stream ended, or after a
    write while it catches up, ends its connection at once
    (``transport.abort``), the unread bytes dropped."""

    def __init__(self, feed: Feed, gate: Gate, pool: ThreadPoolExecutor, drain: float) -> None:
        self.feed, self.gate, self.pool = feed, gate, pool
        self.drain = drain
        #: The connections streaming a watch now (a connection kept alive
        #: may stream another after its first ended).
        self.streaming: set[asyncio.BaseTransport] = set()

    async def anything(self, request: web.Request) -> web.StreamResponse:
        rid = "req-%s" % uuid.uuid4()
        if request.path != PATH:
            return _problem(404, "The resource could not be found.", rid)
        if request.method != "GET":
            return _problem(405, "Only GET is allowed here.", rid)
        fmt = _format(request)
        if fmt is None:
            return _problem(400, "Invalid format: expected sse or jsonl.", rid)
        answer = await asyncio.get_running_loop().run_in_executor(
            self.pool, self.gate, _environ(request, rid)
        )
        if isinstance(answer, Refusal):
            resp = web.Response(status=answer.status, body=answer.body)
            for name, value in answer.headers:
                resp.headers[name] = value
            resp.headers["x-openstack-request-id"] = rid
            return resp
        return await self._stream(request, fmt, answer, rid)

    async def _stream(
        self, request: web.Request, fmt: str, ask: Ask, rid: str
    ) -> web.StreamResponse:
        resp = web.StreamResponse(
            headers={
                "Content-Type": fmt,
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
                "x-openstack-request-id": rid,
            }
        )
        # Chunked, so that the feed knows how to frame what it writes to
        # the connection itself (HTTP/1.0: as it is, ended by closing).
        chunked = request.version >= HttpVersion11
        if chunked:
            resp.enable_chunked_encoding()
        await resp.prepare(request)
        transport = request.transport
        if transport is None:
            return resp  # gone already
        w = Watcher(fmt, ask.filters, ask.tree, cast(asyncio.WriteTransport, transport), chunked)
        write = functools.partial(self._write, resp)
        self.streaming.add(transport)
        try:
            await write(frames(fmt, entries(ask.after, ask.page.events)))
            await self.feed.follow(w, ask.after.merged(ask.page.upto), write)
            await w.ended  # the feed writes; cancelled when the peer goes
        except Stalled:
            self._abort(w.transport)
        except events.Gone:
            pass  # pruned while catching up: the next request says 410
        except ConnectionError:
            pass  # the watcher went away
        except Exception as exc:  # noqa: BLE001 - end this watch only
            # It resumes from its last position on its next request.
            LOG.warning("ending a watch (%s): %s", rid, exc)
        finally:
            self.feed.leave(w)
            self.streaming.discard(transport)
            # What is left (the rest of the frames, the end of the stream
            # aiohttp writes after this returns) has ``drain`` seconds.
            asyncio.get_running_loop().call_later(self.drain, self._expire, w.transport)
        return resp

    async def _write(self, resp: web.StreamResponse, data: bytes) -> None:
        """Write ``data``, waiting for the client to read what the
        connection cannot hold, at most ``drain`` seconds (``Stalled``)."""
        try:
            await asyncio.wait_for(resp.write(data), self.drain)
        except TimeoutError:
            raise Stalled() from None

    def _expire(self, transport: asyncio.WriteTransport) -> None:
        """``drain`` seconds after its stream ended: end the connection
        if its client still has not read all of it (and it streams no
        other watch since)."""
        if transport not in self.streaming and (transport.get_write_buffer_size()):
            self._abort(transport)

    def _abort(self, transport: asyncio.WriteTransport) -> None:
        LOG.info(
            "change feed: closing a watch whose client left %d bytes "
            "unread for %g s ([berth] watch_drain_timeout)",
            transport.get_write_buffer_size(),
            self.drain,
        )
        transport.abort()
