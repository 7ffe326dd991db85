"""How ``berth serve``'s worker closes a connection once it answered.

gunicorn 26 and later half-close every connection and then read until the
client closes its end (up to 2 s), so that unread request bytes cannot
turn the close into a reset that destroys the answer. A sync worker
serves one connection at a time and waits all that while. Berth's worker
closes at once when the request was read to its end and nothing more
waits unread (``berth.serve.edge.close_when_read``), and leaves gunicorn's
close to the rest.

Covers ``berth.serve.edge`` and the ``BODY_READ`` mark of
``berth.api.app``.
"""

from __future__ import annotations

import os
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from berth.serve.edge import close_when_read
from support.processes import Server, start_berth, stop_berth


@pytest.fixture
def pair() -> Iterator[tuple[socket.socket, socket.socket]]:
    server, client = socket.socketpair()
    try:
        yield server, client
    finally:
        server.close()
        client.close()


def test_nothing_unread_closes_at_once(pair: tuple[socket.socket, socket.socket]) -> None:
    server, client = pair
    server.sendall(b"answer")
    close_when_read(server)
    assert server.fileno() == -1
    client.settimeout(5)
    assert client.recv(100) == b"answer"
    assert client.recv(100) == b""  # the end, not a reset


def test_unread_bytes_leave_the_close_to_gunicorn(
    pair: tuple[socket.socket, socket.socket],
) -> None:
    server, client = pair
    client.sendall(b"GET / HTTP/1.1\r\n")  # a next request, pipelined
    server.sendall(b"answer")
    close_when_read(server)
    assert server.fileno() != -1
    assert server.recv(100) == b"GET / HTTP/1.1\r\n"  # still there to drain


def test_a_client_gone_is_closed_at_once(pair: tuple[socket.socket, socket.socket]) -> None:
    server, client = pair
    client.close()
    close_when_read(server)
    assert server.fileno() == -1


def _request(body: bytes = b"", method: str = "GET", path: str = "/") -> bytes:
    head = (
        "%s %s HTTP/1.1\r\nHost: x\r\nx-auth-token: admin\r\n"
        "openstack-api-version: placement 1.7\r\n" % (method, path)
    )
    if body:
        head += "content-type: application/json\r\ncontent-length: %d\r\n" % len(body)
    return head.encode() + b"\r\n" + body


def _answer(conn: socket.socket) -> bytes:
    """One whole answer read off ``conn`` (its headers say its length),
    the connection left open."""
    conn.settimeout(30)
    got = b""
    while b"\r\n\r\n" not in got:
        chunk = conn.recv(65536)
        assert chunk, got
        got += chunk
    head, _, body = got.partition(b"\r\n\r\n")
    [length] = [
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    ]
    while len(body) < length:
        chunk = conn.recv(65536)
        assert chunk
        body += chunk
    return head


def _sockets(pid: int) -> int:
    """How many sockets process ``pid`` holds open."""
    folder = "/proc/%d/fd" % pid
    count = 0
    for name in os.listdir(folder):
        try:
            count += os.readlink(os.path.join(folder, name)).startswith("socket:")
        except FileNotFoundError:
            pass
    return count


def _worker(srv: Server) -> int:
    """The one worker's pid, from the line gunicorn logs once it has
    forked it (the master may log that it serves before that)."""
    booted = re.search(r"Booting worker with pid: (\d+)", srv.wait_log("Booting worker"))
    assert booted
    return int(booted.group(1))


def _released(pid: int, baseline: int, within: float = 1.0) -> bool:
    """Whether the worker holds no more sockets than ``baseline`` within
    ``within`` seconds (gunicorn's own close holds one for 2 s)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if _sockets(pid) <= baseline:
            return True
        time.sleep(0.02)
    return False


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="reads Linux's /proc")
def test_a_client_that_keeps_its_end_open_does_not_hold_the_worker(tmp_path: Path) -> None:
    """One worker; each client reads its whole answer and keeps its end
    of the connection open. The worker lets go of the connection at
    once, after a GET as after a POST with a body; with bytes of a next
    request left unread it keeps gunicorn's graceful close, and the
    client still reads its answer whole."""
    srv = start_berth(tmp_path, "--workers", "1")
    try:
        srv.wait_log("serving Placement API")
        pid = _worker(srv)
        baseline = _sockets(pid)  # the listening socket (the database is a file)
        warm = socket.create_connection(("127.0.0.1", srv.port))
        warm.sendall(_request())
        assert _answer(warm).startswith(b"HTTP/1.1 200")
        warm.close()  # let go of whichever way it closes
        assert _released(pid, baseline, within=5.0)
        held = []
        for request in (
            _request(),
            _request(b'{"name": "CUSTOM_KEPT_OPEN"}', "POST", "/resource_classes"),
        ):
            conn = socket.create_connection(("127.0.0.1", srv.port))
            held.append(conn)
            conn.sendall(request)
            status = _answer(conn).split(b"\r\n")[0]
            assert status.split(b" ")[1] in (b"200", b"201"), status
            assert _released(pid, baseline), "the worker still holds the connection"
        # Bytes of a second request sent with the first stay unread:
        # gunicorn's graceful close drains them, and the answer arrives
        # whole, not cut by a reset.
        conn = socket.create_connection(("127.0.0.1", srv.port))
        held.append(conn)
        conn.sendall(_request() + _request())
        assert _answer(conn).startswith(b"HTTP/1.1 200")
        for conn in held:
            conn.close()
    finally:
        stop_berth(srv)
