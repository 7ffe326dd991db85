"""The change feed's fan-out alone: its cost per watcher per batch.

    PYTHONPATH=src .venv/bin/python bench/feed_fanout.py --watchers 5000 \
        --batches 20
    PYTHONPATH=src valgrind --tool=callgrind --instr-atstart=no \
        .venv/bin/python bench/feed_fanout.py --watchers 300 --batches 10 \
        --callgrind

Serves the watch in this process over a fresh SQLite database, joins
``--watchers`` watches over loopback sockets that never read (the
kernel's buffers take what a few batches send), then hands the feed
``--batches`` batches of five events by hand (no poll, no API) and waits
until every frame is written. Prints the process's CPU for that phase
per watcher and batch. ``--callgrind`` (under valgrind, started with
``--instr-atstart=no``) counts instructions of that phase only: run it
with ``--batches 0`` too, and the difference over watchers x batches is
the user-space instructions per watcher per batch, whatever the
machine's load (the kernel's ``send`` is not counted).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import socket
import subprocess
import tempfile
import time

from berth import conf as berth_conf
from berth.db import events, setup
from berth.db.engine import Database
from berth.serve import watch
from berth.serve.watch import feed as feed_mod

REQUEST = b"GET /berth/changes/watch?after=now HTTP/1.1\r\nHost: x\r\nx-auth-token: admin\r\n\r\n"


def joined(feed: feed_mod.Feed) -> int:
    return sum(len(group) for group in feed.groups.values())


async def join(port: int, feed: feed_mod.Feed, count: int) -> list[socket.socket]:
    """``count`` watches that never read, once the feed joined them."""
    socks = []
    for i in range(count):
        sock = socket.create_connection(("127.0.0.1", port))
        sock.sendall(REQUEST)
        socks.append(sock)
        while i + 1 - joined(feed) > 100:  # a bounded backlog of joins
            await asyncio.sleep(0.01)
    while joined(feed) < count:
        await asyncio.sleep(0.05)
    return socks


def callgrind(switch: str) -> None:
    subprocess.run(
        ["callgrind_control", "-i", switch, str(os.getpid())], check=True, capture_output=True
    )


async def main(args: argparse.Namespace) -> None:
    conf = berth_conf.load([])
    conf.set_override("auth_strategy", "noauth2", group="api")
    conf.set_override(
        "connection", "sqlite:///%s/feed.sqlite" % tempfile.mkdtemp(), group="placement_database"
    )
    engine = setup.engine_from_conf(conf)
    setup.prepare(engine)
    sock = watch.listen_socket("127.0.0.1", 0)
    running = await watch.open_server(conf, Database(engine), sock)
    running.reader.cancel()  # the batches come by hand
    feed = running.feed
    socks = await join(sock.getsockname()[1], feed, args.watchers)
    now = time.time()
    made = [
        events.Stored(
            1,
            10**6 + n,
            0,
            "provider.created",
            "p%d" % n,
            None,
            None,
            now,
            {"name": "x" * 100},
            None,
        )
        for n in range(5 * args.batches)
    ]
    await asyncio.sleep(0.5)  # the joins' bookmarks gone out
    if args.callgrind:
        callgrind("on")
    cpu = time.process_time()
    for n in range(args.batches):
        found = made[5 * n : 5 * n + 5]
        feed._deliver(feed_mod.Batch(found, {1: found[-1].seq}, {}))
        # Until the frames are written (by the loop's other tasks, if
        # the feed hands them any).
        for _ in range(3):
            await asyncio.sleep(0)
    cpu = time.process_time() - cpu
    if args.callgrind:
        callgrind("off")
    print(
        "%d watchers, %d batches: %.3f s CPU, %.2f us per watcher and "
        "batch"
        % (args.watchers, args.batches, cpu, 1e6 * cpu / max(1, args.watchers * args.batches))
    )
    for each in socks:
        each.close()
    await watch.close_server(running)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--watchers", type=int, default=2000)
    parser.add_argument("--batches", type=int, default=10)
    parser.add_argument("--callgrind", action="store_true")
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    asyncio.run(main(parser.parse_args()))
