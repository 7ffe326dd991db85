"""A watch client that stops reading holds nothing for ever: once its
stream has ended, or while it catches up on history, what it leaves
unread for ``[berth] watch_drain_timeout`` seconds ends its connection
(real sockets against the watch server, with a tiny timeout)."""

from __future__ import annotations

import logging
import socket
from typing import Any

import pytest

from berth.serve import watch
from berth.serve.watch import feed as feed_mod
from support.change_feed import position
from support.change_watch import (
    OPEN,
    FeedServer,
    big_provider,
    many_claims,
    new_provider,
    wait_for,
)
from tests.conftest import Client

#: The terminating chunk of a chunked stream that ended whole.
LAST_CHUNK = b"\r\n0\r\n\r\n"


def stalled_client(port: int, query: str) -> socket.socket:
    """A watch request on a socket with a tiny receive buffer, whose
    caller then reads nothing."""
    sock = socket.socket()
    OPEN.append(sock)  # type: ignore[arg-type] - closed as a Stream
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.settimeout(10)
    sock.connect(("127.0.0.1", port))
    sock.sendall(
        b"GET %s?%s HTTP/1.1\r\nHost: t\r\nx-auth-token: admin\r\n"
        b"\r\n" % (watch.PATH.encode(), query.encode())
    )
    return sock


def read_all(sock: socket.socket) -> bytes:
    """Everything the kernel still hands over, until the end (a reset
    counts as an end)."""
    got = []
    try:
        while data := sock.recv(65536):
            got.append(data)
    except ConnectionResetError:
        pass
    sock.close()
    return b"".join(got)


def closed(transport: Any) -> bool:
    return bool(transport.get_extra_info("socket").fileno() == -1)


def test_an_ended_watch_whose_client_never_reads_is_aborted(
    client: Client, drain_feed: FeedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Anything left in its buffer at the next frame counts as not reading.
    monkeypatch.setattr(feed_mod, "MAX_BUFFERED", 0)
    rp = big_provider(client)
    sock = stalled_client(drain_feed.port, "after=%s&kind=allocations.replaced" % position(client))
    running = drain_feed.running.feed
    wait_for(lambda: running.watchers == 1, "the watcher joins")
    ((watcher,),) = running.groups.values()
    many_claims(client, rp, 400)
    wait_for(lambda: running.watchers == 0, "the slow reader is ended")
    # Its connection held the frames it had not read; now it is gone,
    # buffer and socket, though the client still reads nothing.
    wait_for(lambda: closed(watcher.transport), "the connection is aborted")
    assert watcher.transport.get_write_buffer_size() == 0
    got = read_all(sock)
    assert got.startswith(b"HTTP/1.1 200 ")
    assert not got.endswith(LAST_CHUNK)  # cut, not ended: it resumes


def test_a_client_that_reads_its_ended_stream_keeps_it_whole(
    client: Client, drain_feed: FeedServer
) -> None:
    start = position(client)
    sock = stalled_client(drain_feed.port, "after=" + start)
    running = drain_feed.running.feed
    wait_for(lambda: running.watchers == 1, "the watcher joins")
    made = new_provider(client, "read")
    wait_for(lambda: running.text != start, "the feed reads the write")
    ((watcher,),) = running.groups.values()
    running.end_all()  # as when the server stops
    wait_for(
        lambda: watcher.transport.get_write_buffer_size() == 0, "everything reaches the kernel"
    )
    sock.settimeout(1.0)
    got = b""
    while not got.endswith(LAST_CHUNK):
        got += sock.recv(65536)
    assert made.encode() in got
    sock.settimeout(10)
    sock.sendall(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")  # still served
    assert sock.recv(65536).startswith(b"HTTP/1.1 404 ")
    sock.close()


def test_a_watcher_that_stops_reading_while_catching_up_is_aborted(
    client: Client, drain_feed: FeedServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="berth.server")
    start = position(client)
    rp = big_provider(client)
    many_claims(client, rp, 400)  # more than the buffers hold
    sock = stalled_client(drain_feed.port, "after=" + start)
    wait_for(lambda: "watch_drain_timeout" in caplog.text, "the stalled catch-up is aborted")
    got = read_all(sock)
    assert got.startswith(b"HTTP/1.1 200 ")
    assert not got.endswith(LAST_CHUNK)
    assert drain_feed.running.feed.watchers == 0  # it never joined
