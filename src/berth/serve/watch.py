"""The change feed's watch form: ``GET /berth/changes/watch`` on
``[berth] watch_listen``, served by one asynchronous process beside
gunicorn's workers (``berth.serve.master`` forks it, restarts it when it
dies and stops it with itself), so a watcher never holds a request worker.

One event loop. One reader (:class:`Feed`) polls the change sequence
every ``POLL`` seconds; when it moved, it reads the new events once (from
the shared table, so every server's writes reach every server's
watchers), keeps them in a short ring for watchers that join, and hands
each group of watchers with the same filters the frames of the events
that pass them, each frame encoded once per format. A watcher that joins
reads from the database until its position is inside the ring, replays
the ring after it, and joins the live stream with nothing between (the
loop is single-threaded: the last replay and the joining are one step).

Each watcher is authenticated exactly as the API authenticates
(``berth.api.auth.wrap``: keystonemiddleware or noauth2, run in a thread
for each new watcher), then authorized and narrowed by the one function
``GET /berth/changes`` uses (``handlers.change.feed_query``). Frames are
JSON lines (default) or Server-Sent Events (``Accept: text/event-stream``
or ``format=sse``); every event says the position to resume from after
it, and an idle stream gets a bookmark (a frame with only the position)
every ``HEARTBEAT`` seconds (docs/change-feed.md).
"""

from __future__ import annotations

import asyncio
import errno
import functools
import io
import logging
import os
import signal
import socket
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple
from urllib.parse import parse_qsl

import orjson
from aiohttp import web
from oslo_config import cfg
from oslo_context import context as oslo_context
from sqlalchemy.engine import Connection

from berth.api import auth, errors
from berth.api import util as api_util
from berth.api.handlers import change as handler
from berth.api.schemas import change as schema
from berth.db import events, setup
from berth.db.engine import Database
from berth.domain import change
from berth.domain import errors as de
from berth.policy import Policy

LOG = logging.getLogger("berth.server")

PATH = "/berth/changes/watch"
#: Seconds between two looks at the change sequence.
POLL = 0.05
#: Seconds of silence after which a watcher gets a bookmark.
HEARTBEAT = 5.0
#: The ring of recent events joining watchers replay (whichever is less).
RING_SECONDS, RING_EVENTS = 60.0, 100_000
#: Frames queued for a watcher that does not read; beyond, it is dropped
#: (it resumes from its last position, missing nothing).
MAX_PENDING = 1000
SSE, JSONL = "text/event-stream", "application/x-ndjson"
#: Bookmarks of watchers still catching up: the frame's event name.
BOOKMARK = b"bookmark"

Vector = dict[int, int]


def covers(a: Vector, b: Vector) -> bool:
    """Whether position ``a`` is at or after ``b`` in every slot."""
    return all(a.get(slot, 0) >= seq for slot, seq in b.items())


def merged(a: Vector, b: Vector) -> Vector:
    """The position at or after both ``a`` and ``b``."""
    out = dict(a)
    for slot, seq in b.items():
        if seq > out.get(slot, 0):
            out[slot] = seq
    return out


class Entry(NamedTuple):
    """An event in stream order, with the position to resume from when
    it is the last of its write a watcher gets (``after``) and when more
    of its write follow (``before``: the write is not seen whole)."""

    event: events.Stored
    before: str
    after: str


def entries(start: Vector, found: Iterable[events.Stored]) -> list[Entry]:
    """``found`` (events in stream order, after ``start``) as entries."""
    vec, out = dict(start), []
    for e in found:
        before = change.format_position(vec)
        vec[e.slot] = max(vec.get(e.slot, 0), e.seq)
        out.append(Entry(e, before, change.format_position(vec)))
    return out


def frame(fmt: str, name: bytes, resume: str, data: bytes) -> bytes:
    """One frame: a JSON line, or an SSE event whose id is ``resume``."""
    if fmt == SSE:
        return b"id: %s\nevent: %s\ndata: %s\n\n" % (resume.encode(), name,
                                                      data)
    return data + b"\n"


def bookmark(fmt: str, position: str) -> bytes:
    """A frame with only the position (``{"after": ...}``)."""
    return frame(fmt, BOOKMARK, position,
                 orjson.dumps({"after": position}))


def frames(fmt: str, got: list[Entry], cache: dict[Any, bytes] | None = None
           ) -> bytes:
    """The frames of ``got`` (what one watcher gets, in order); ``cache``
    shares each encoding between the watchers of one batch."""
    out = []
    for n, entry in enumerate(got):
        e = entry.event
        whole = n + 1 == len(got) or (got[n + 1].event.slot,
                                      got[n + 1].event.seq) != (e.slot, e.seq)
        key = (id(entry), whole, fmt)
        data = None if cache is None else cache.get(key)
        if data is None:
            resume = entry.after if whole else entry.before
            data = frame(fmt, e.kind.encode(), resume, orjson.dumps(
                {**handler.event_body(e), "after": resume}))
            if cache is not None:
                cache[key] = data
        out.append(data)
    return b"".join(out)


@dataclass(eq=False)
class Watcher:
    """One open stream: its format, filters and queued frames."""

    fmt: str
    filters: events.Filters
    tree: str | None
    queue: asyncio.Queue[bytes | None] = field(default_factory=asyncio.Queue)
    last: float = field(default_factory=time.monotonic)

    @property
    def group(self) -> tuple[events.Filters, str | None]:
        return self.filters, self.tree

    def push(self, data: bytes | None) -> bool:
        """Queue ``data`` (None: end the stream); False when the watcher
        reads too slowly and was ended instead."""
        if data is not None and self.queue.qsize() >= MAX_PENDING:
            self.queue.put_nowait(None)
            return False
        self.last = time.monotonic()
        self.queue.put_nowait(data)
        return True


class Batch(NamedTuple):
    found: list[events.Stored]
    upto: Vector
    #: Per tree watched: the (slot, seq, idx) of the events about it.
    trees: dict[str, frozenset[tuple[int, int, int]]]


def _key(e: events.Stored) -> tuple[int, int, int]:
    return e.slot, e.seq, e.idx


class Feed:
    """The one reader of the change table and its watchers."""

    def __init__(self, db: Database, pool: ThreadPoolExecutor) -> None:
        self.db, self.pool = db, pool
        self.position: Vector = {}
        self.text = "0"
        self.ring: deque[tuple[float, Entry, Vector]] = deque()
        self.ring_start: Vector = {}
        self.groups: dict[tuple[events.Filters, str | None],
                      set[Watcher]] = {}
        self.reading = False
        self._tick = asyncio.Event()

    async def _db(self, fn: Callable[[Connection], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(
            self.pool, self.db.read, fn)

    async def start(self) -> None:
        current, _ = await self._db(events.marks)
        self._reset(current)

    def _reset(self, current: Vector) -> None:
        self.position, self.text = dict(current), change.format_position(
            current)
        self.ring.clear()
        self.ring_start = dict(current)

    @property
    def watchers(self) -> int:
        return sum(len(group) for group in self.groups.values())

    async def run(self) -> None:
        """Poll, deliver and send bookmarks until cancelled."""
        beat = time.monotonic()
        while True:
            await self._poll()
            now = time.monotonic()
            if now - beat >= 1.0:
                beat = now
                self._heartbeats(now)
            await asyncio.sleep(POLL)

    async def _poll(self) -> None:
        trees = {tree for _, tree in self.groups if tree is not None}
        self.reading = True
        try:
            batch = await self._db(functools.partial(
                _read_batch, after=dict(self.position), trees=trees))
        except events.Gone:
            LOG.warning("change feed: the watched history is gone (pruned "
                        "or another database); ending every watch")
            self.end_all()
            self._reset((await self._db(events.marks))[0])
            batch = None
        except Exception as exc:  # noqa: BLE001 - keep serving; retry
            LOG.warning("change feed: reading the change table failed: %s",
                        exc)
            await asyncio.sleep(1.0)
            batch = None
        finally:
            self.reading = False
        if batch is not None:
            self._deliver(batch)
        self._tick.set()
        self._tick = asyncio.Event()

    def _deliver(self, batch: Batch) -> None:
        start = self.position
        got = entries(start, batch.found)
        cache: dict[Any, bytes] = {}
        for (filters, tree), group in list(self.groups.items()):
            about = None if tree is None else batch.trees.get(tree, frozenset())
            mine = [x for x in got if change.passes(filters, x.event) and (
                about is None or _key(x.event) in about)]
            if not mine:
                continue
            by_fmt: dict[str, bytes] = {}
            for w in list(group):
                data = by_fmt.get(w.fmt)
                if data is None:
                    data = by_fmt[w.fmt] = frames(w.fmt, mine, cache)
                if not w.push(data):
                    self.leave(w)
        self.position = merged(self.position, batch.upto)
        self.text = change.format_position(self.position)
        now = time.monotonic()
        vec = dict(start)
        for x in got:
            vec = merged(vec, {x.event.slot: x.event.seq})
            self.ring.append((now, x, vec))
        while self.ring and (len(self.ring) > RING_EVENTS
                             or now - self.ring[0][0] > RING_SECONDS):
            self.ring_start = merged(self.ring_start, self.ring.popleft()[2])

    def _heartbeats(self, now: float) -> None:
        marks: dict[str, bytes] = {}
        for group in list(self.groups.values()):
            for w in list(group):
                if now - w.last >= HEARTBEAT:
                    data = marks.get(w.fmt)
                    if data is None:
                        data = marks[w.fmt] = bookmark(w.fmt, self.text)
                    if not w.push(data):
                        self.leave(w)

    def leave(self, w: Watcher) -> None:
        group = self.groups.get(w.group)
        if group is not None:
            group.discard(w)
            if not group:
                del self.groups[w.group]

    def end_all(self) -> None:
        for group in list(self.groups.values()):
            for w in group:
                w.push(None)
        self.groups.clear()

    async def follow(self, w: Watcher, at: Vector,
                     write: Callable[[bytes], Any]) -> None:
        """Bring ``w`` from position ``at`` up to the live stream (the
        database, then the ring), writing what it gets, and join it.
        Raises ``events.Gone`` when the history after ``at`` is pruned."""
        while True:
            if not covers(at, self.ring_start):  # older than the ring
                page = await self._db(functools.partial(
                    change.read, after=at, filters=w.filters, tree=w.tree,
                    limit=schema.DEFAULT_LIMIT))
                await write(frames(w.fmt, entries(at, page.events)))
                at = merged(at, page.upto)
                continue
            if self.reading or not covers(self.position, at):
                await self._tick.wait()  # the reader is not there yet
                continue
            fresh = [x.event for _, x, _ in self.ring
                     if x.event.seq > at.get(x.event.slot, 0)]
            if not fresh:  # nothing between: join (one step of the loop)
                self.groups.setdefault(w.group, set()).add(w)
                w.push(bookmark(w.fmt, self.text))
                return
            reached = dict(self.position)
            mine = [e for e in fresh if change.passes(w.filters, e)]
            if w.tree is not None and mine:
                mine = await self._db(functools.partial(
                    change.of_tree, found=mine, tree=w.tree))
            await write(frames(w.fmt, entries(at, mine)))
            at = merged(at, reached)


def _read_batch(conn: Connection, after: Vector,
                trees: set[str]) -> Batch | None:
    """Every event after ``after`` (None when the sequence has not
    moved), and which are about each of ``trees``."""
    current, _ = events.marks(conn)
    if covers(after, current):
        return None
    found: list[events.Stored] = []
    pos: Vector = dict(after)
    while True:
        page = events.read(conn, pos, events.Filters(), schema.MAX_LIMIT)
        found += page.events
        pos = merged(pos, page.upto)
        if not page.more:
            break
    about = {tree: frozenset(_key(e) for e in change.of_tree(conn, found, tree))
             for tree in trees}
    return Batch(found, pos, about)


class Refusal(NamedTuple):
    """An answer in the Placement error format, instead of a stream."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes


class Ask(NamedTuple):
    """An authorized watch: its filters and the first page."""

    filters: events.Filters
    tree: str | None
    page: events.Page
    after: Vector


class Gate:
    """Authentication exactly as the API's (``auth.wrap``), then the
    query, the policy narrowing and the first page, as ``GET
    /berth/changes`` answers them. Blocking: run in a thread."""

    def __init__(self, conf: cfg.ConfigOpts, db: Database,
                 policy: Policy) -> None:
        self.db, self.policy = db, policy
        self.app = auth.wrap(self._inner, conf)

    def __call__(self, environ: dict[str, Any]) -> Refusal | Ask:
        said: dict[str, Any] = {}

        def start(status: str, headers: list[tuple[str, str]],
                  exc_info: Any = None) -> Callable[[bytes], None]:
            said["status"], said["headers"] = status, headers
            return lambda data: None

        body = b"".join(self.app(environ, start))
        ask: Ask | None = environ.get("berth.watch")
        if ask is not None:
            return ask
        return Refusal(int(said["status"].split(" ")[0]), said["headers"],
                       body)

    def _inner(self, environ: dict[str, Any],
               start_response: Callable[..., Any]) -> Iterable[bytes]:
        try:
            environ["berth.watch"] = self._ask(environ)
            start_response("200 OK", [])
            return [b""]
        except (errors.HTTPProblem, de.DomainError) as exc:
            problem = (exc if isinstance(exc, errors.HTTPProblem)
                       else errors.from_domain(exc))
            body = orjson.dumps(problem.to_dict(
                environ["berth.request_id"], True, "GET"))
            start_response("%d %s" % (problem.status, errors.STATUS_TEXT.get(
                problem.status, ("Error",))[0]), [
                ("Content-Type", "application/json"),
                *problem.headers.items()])
            return [body]

    def _ask(self, environ: dict[str, Any]) -> Ask:
        ctx = oslo_context.RequestContext.from_environ(environ)
        pairs = [(k, v) for k, v in parse_qsl(
            environ.get("QUERY_STRING", ""), keep_blank_values=True)
            if k != "format"]
        resume = environ.get("HTTP_LAST_EVENT_ID")
        if resume:  # an EventSource reconnecting: its last event's id
            pairs = [(k, v) for k, v in pairs if k != "after"]
            pairs.append(("after", resume))
        params = api_util.query_dict(api_util.validate_pairs(
            pairs, schema.QUERY))
        filters, tree, limit = handler.feed_query(
            params, lambda project: self.policy.authorize(
                ctx, handler.RULE, {"project_id": project, "user_id": None}))
        page = self.db.read(functools.partial(
            change.read_feed, after=params["after"], filters=filters,
            tree=tree, limit=limit))
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
        "REQUEST_METHOD": "GET", "PATH_INFO": request.path,
        "SCRIPT_NAME": "", "QUERY_STRING": request.query_string,
        "SERVER_NAME": request.host.rpartition(":")[0] or request.host,
        "SERVER_PORT": "0", "SERVER_PROTOCOL": "HTTP/1.1",
        "REMOTE_ADDR": request.remote or "", "wsgi.url_scheme": "http",
        "wsgi.input": io.BytesIO(), "wsgi.errors": io.StringIO(),
        "berth.request_id": request_id, "openstack.request_id": request_id}
    for name, value in request.headers.items():
        key = name.upper().replace("-", "_")
        if key in ("CONTENT_TYPE", "CONTENT_LENGTH"):
            environ[key] = value
        else:
            environ["HTTP_" + key] = value
    environ["HTTP_ACCEPT"] = "application/json"
    return environ


def _problem(status: int, detail: str, request_id: str) -> web.Response:
    body = orjson.dumps(errors.HTTPProblem(status, detail).to_dict(
        request_id, True, "GET"))
    return web.Response(status=status, body=body,
                        content_type="application/json",
                        headers={"x-openstack-request-id": request_id})


class Server:
    """The aiohttp side: one handler per watcher."""

    def __init__(self, feed: Feed, gate: Gate, pool: ThreadPoolExecutor
                 ) -> None:
        self.feed, self.gate, self.pool = feed, gate, pool

    async def anything(self, request: web.Request) -> web.StreamResponse:
        rid = "req-%s" % uuid.uuid4()
        if request.path != PATH:
            return _problem(404, "The resource could not be found.", rid)
        if request.method != "GET":
            return _problem(405, "Only GET is allowed here.", rid)
        fmt = _format(request)
        if fmt is None:
            return _problem(400, "Invalid format: expected sse or jsonl.",
                            rid)
        answer = await asyncio.get_running_loop().run_in_executor(
            self.pool, self.gate, _environ(request, rid))
        if isinstance(answer, Refusal):
            resp = web.Response(status=answer.status, body=answer.body)
            for name, value in answer.headers:
                resp.headers[name] = value
            resp.headers["x-openstack-request-id"] = rid
            return resp
        return await self._stream(request, fmt, answer, rid)

    async def _stream(self, request: web.Request, fmt: str, ask: Ask,
                      rid: str) -> web.StreamResponse:
        resp = web.StreamResponse(headers={
            "Content-Type": fmt, "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no", "x-openstack-request-id": rid})
        await resp.prepare(request)
        w = Watcher(fmt, ask.filters, ask.tree)
        try:
            await resp.write(frames(fmt, entries(ask.after, ask.page.events)))
            await self.feed.follow(w, merged(ask.after, ask.page.upto),
                                   resp.write)
            while (data := await w.queue.get()) is not None:
                await resp.write(data)
        except events.Gone:
            pass  # pruned while catching up: the next request says 410
        except (ConnectionError, asyncio.CancelledError):
            pass  # the watcher went away
        finally:
            self.feed.leave(w)
        return resp


def parse_listen(value: str) -> tuple[str, int]:
    """``host:port`` (IPv6 hosts in brackets); ValueError otherwise."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError("[berth] watch_listen must be host:port, not %r"
                         % value)
    return host.strip("[]"), int(port)


def listen_address(conf: cfg.ConfigOpts, host: str, port: int
                   ) -> tuple[str, int] | None:
    """Where the feed listens for an API on ``host:port``: ``[berth]
    watch_listen``, unset meaning the API's host and its port + 1, empty
    meaning nowhere (None). SystemExit with one line for a bad value."""
    value = conf.berth.watch_listen
    if value is None:
        return host, port + 1
    if not value:
        return None
    try:
        return parse_listen(value)
    except ValueError as exc:
        raise SystemExit("berth: error: %s" % exc) from None


def listen_socket(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``; SystemExit with one line when
    it cannot be bound (in use, not this machine's address)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(
            host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise SystemExit("berth: error: cannot listen on %s:%d for the "
                         "change feed ([berth] watch_listen): %s"
                         % (host, port, exc.strerror or exc)) from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(1024)
    except OSError as exc:
        sock.close()
        hint = (" (set [berth] watch_listen to a free host:port, or empty "
                "to serve no watch)" if exc.errno == errno.EADDRINUSE else "")
        raise SystemExit("berth: error: cannot listen on %s:%d for the "
                         "change feed: %s%s" % (host, port,
                                                exc.strerror or exc, hint)
                         ) from None
    sock.setblocking(False)
    return sock


def serve(conf: cfg.ConfigOpts, sock: socket.socket, parent: int) -> None:
    """Serve the watch on ``sock`` until SIGTERM or SIGINT, or until
    process ``parent`` (the master) is gone."""
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGQUIT,
                signal.SIGCHLD, signal.SIGUSR1, signal.SIGUSR2,
                signal.SIGTTIN, signal.SIGTTOU, signal.SIGWINCH):
        signal.signal(sig, signal.SIG_DFL)
    asyncio.run(_main(conf, sock, parent))


async def _main(conf: cfg.ConfigOpts, sock: socket.socket,
                parent: int) -> None:
    db = Database(setup.engine_from_conf(conf))
    pool = ThreadPoolExecutor(8, thread_name_prefix="berth-watch")
    feed = Feed(db, pool)
    await feed.start()
    server = Server(feed, Gate(conf, db, Policy(conf)), pool)
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server.anything)
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None,
                           shutdown_timeout=1.0)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    host, port = sock.getsockname()[:2]
    LOG.info("serving the change feed's watch on http://%s:%d%s (pid %d)",
             host, port, PATH, os.getpid())
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    reader = asyncio.create_task(feed.run())
    while not stop.is_set() and os.getppid() == parent:
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except TimeoutError:
            pass
    reader.cancel()
    feed.end_all()
    await runner.cleanup()
    pool.shutdown(wait=False, cancel_futures=True)
    db.dispose()
