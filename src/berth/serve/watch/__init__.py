"""The change feed's watch form: ``GET /berth/changes/watch`` on
``[berth] watch_listen``, served by one asynchronous process beside
gunicorn's workers (``berth.serve.master`` forks it, restarts it when it
dies and stops it with itself), so a watcher never holds a request worker.

One event loop. One reader (:class:`Feed`) polls the change sequence
every ``POLL`` seconds (longer with thousands of watchers open:
``poll_interval``); when it moved, it reads the new events once (from
the shared table, so every server's writes reach every server's
watchers), keeps them in a short ring for watchers that join, and writes
each group of watchers with the same filters the frames of the events
that pass them straight to their connections, each batch encoded once
per format (no task or queue per watcher: one non-blocking write each).
A watcher that joins reads from the database until its position is
inside the ring, replays the ring after it, and joins the live stream
with nothing between (the loop is single-threaded: the last replay and
the joining are one step).

Each watcher is authenticated exactly as the API authenticates
(``berth.api.auth.wrap``: keystonemiddleware or noauth2, run in a thread
for each new watcher), then authorized and narrowed by the one function
``GET /berth/changes`` uses (``api/views/change.feed_query``). Frames are
JSON lines (default) or Server-Sent Events (``Accept: text/event-stream``
or ``format=sse``); every event says the position to resume from after
it, and an idle stream gets a bookmark (a frame with only the position)
every ``HEARTBEAT`` seconds (docs/change-feed.md).
"""

from __future__ import annotations

import asyncio
import ctypes
import errno
import logging
import os
import signal
import socket
from concurrent.futures import ThreadPoolExecutor
from typing import NamedTuple

from aiohttp import web
from oslo_config import cfg

from berth.conf import check
from berth.db import setup
from berth.db.engine import Database
from berth.metrics import Metrics
from berth.policy import Policy
from berth.serve.watch.feed import PATH, Feed
from berth.serve.watch.http import Gate, Server

LOG = logging.getLogger("berth.server")

#: What ``ps -o comm``, ``top`` and ``/proc/PID/comm`` call the feed's
#: process (Linux keeps 15 bytes).
PROCESS_NAME = b"berth-feed"
#: prctl(2)'s option to set the calling thread's name.
_PR_SET_NAME = 15


def listen_address(conf: cfg.ConfigOpts) -> tuple[str, int] | None:
    """Where the feed listens: ``[berth] watch_listen``, or None when it
    is unset or empty (no watch: a port nobody asked for is never
    taken). SystemExit with one line for a bad value."""
    value = conf.berth.watch_listen
    if not value:
        return None
    try:
        return check.parse_listen(value, "watch_listen")
    except ValueError as exc:
        raise SystemExit("berth: error: %s" % exc) from None


def listen_socket(host: str, port: int) -> socket.socket:
    """A listening socket on ``host:port``; SystemExit with one line when
    it cannot be bound (in use, not this machine's address)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise SystemExit(
            "berth: error: cannot listen on %s:%d for the "
            "change feed ([berth] watch_listen): %s" % (host, port, exc.strerror or exc)
        ) from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(1024)
    except OSError as exc:
        sock.close()
        hint = (
            " (set [berth] watch_listen to a free host:port, or empty to serve no watch)"
            if exc.errno == errno.EADDRINUSE
            else ""
        )
        raise SystemExit(
            "berth: error: cannot listen on %s:%d for the "
            "change feed: %s%s" % (host, port, exc.strerror or exc, hint)
        ) from None
    sock.setblocking(False)
    return sock


def serve(conf: cfg.ConfigOpts, sock: socket.socket, parent: int) -> None:
    """Serve the watch on ``sock`` until SIGTERM or SIGINT, or until
    process ``parent`` (the master) is gone."""
    for sig in (
        signal.SIGTERM,
        signal.SIGINT,
        signal.SIGHUP,
        signal.SIGQUIT,
        signal.SIGCHLD,
        signal.SIGUSR1,
        signal.SIGUSR2,
        signal.SIGTTIN,
        signal.SIGTTOU,
        signal.SIGWINCH,
    ):
        signal.signal(sig, signal.SIG_DFL)
    name_process(PROCESS_NAME)
    asyncio.run(_main(conf, sock, parent))


def name_process(name: bytes) -> None:
    """Name this process ``name`` where ``ps`` and ``top`` show it, not
    the master's command line it was forked with (Linux; elsewhere, or
    without a C library to ask, nothing). The main thread's name is the
    process's; threads started after it inherit it."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_NAME, ctypes.c_char_p(name[:15]), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: no prctl to call
        pass


class Running(NamedTuple):
    """A started watch server (:func:`open_server`)."""

    runner: web.AppRunner
    reader: asyncio.Task[None]
    feed: Feed
    pool: ThreadPoolExecutor


async def open_server(conf: cfg.ConfigOpts, db: Database, sock: socket.socket) -> Running:
    """Serve the watch on ``sock`` from this event loop, reading ``db``
    (:func:`close_server` stops it)."""
    pool = ThreadPoolExecutor(8, thread_name_prefix="berth-watch")
    metrics = Metrics()
    feed = Feed(db, pool, metrics)
    await feed.start()
    server = Server(
        feed, Gate(conf, db, Policy(conf), metrics), pool, conf.berth.watch_drain_timeout
    )
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", server.anything)
    runner = web.AppRunner(app, handler_cancellation=True, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    await web.SockSite(runner, sock).start()
    return Running(runner, asyncio.create_task(feed.run()), feed, pool)


async def close_server(running: Running) -> None:
    """End every watch and stop serving."""
    running.reader.cancel()
    await asyncio.wait([running.reader], timeout=10.0)
    running.feed.end_all()
    await running.runner.cleanup()
    running.pool.shutdown(wait=False, cancel_futures=True)


async def _main(conf: cfg.ConfigOpts, sock: socket.socket, parent: int) -> None:
    db = Database(setup.engine_from_conf(conf))
    running = await open_server(conf, db, sock)
    host, port = sock.getsockname()[:2]
    LOG.info(
        "serving the change feed's watch on http://%s:%d%s (pid %d)", host, port, PATH, os.getpid()
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    # Ends with the master, even one killed without a word.
    while not stop.is_set() and os.getppid() == parent:
        try:
            await asyncio.wait_for(stop.wait(), 1.0)
        except TimeoutError:
            pass
    await close_server(running)
    db.dispose()
