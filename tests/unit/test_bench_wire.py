"""The race's scheduler client (``bench/run.py``'s ``Wire``): answers read
whole by their length, a new connection when the server closed the last,
one resend when a kept connection was closed before any answer, 599 when
no server answers."""

from __future__ import annotations

import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import run  # noqa: E402


class Peer:
    """A TCP server answering each connection as ``serve`` says, in a
    thread; records each request's first line per connection."""

    def __init__(self, serve: Callable[[socket.socket, int], None]) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.serve = serve
        self.connections = 0
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while True:
            try:
                sock, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            with sock:
                self.serve(sock, self.connections)

    def close(self) -> None:
        self.listener.close()


def _request(sock: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        more = sock.recv(4096)
        if not more:
            return b""
        data += more
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length: ")[1].split(b"\r\n")[0])
    while len(body) < length:
        body += sock.recv(4096)
    return head.split(b"\r\n")[0] + b" " + body


@pytest.fixture
def peers() -> Iterator[list[Peer]]:
    made: list[Peer] = []
    yield made
    for peer in made:
        peer.close()


def test_an_answer_in_pieces_is_read_by_its_length_and_close_means_reconnect(
    peers: list[Peer],
) -> None:
    seen: list[bytes] = []

    def serve(sock: socket.socket, n: int) -> None:
        seen.append(_request(sock))
        body = b'{"n": %d, "pad": "%s"}' % (n, b"x" * 70000)
        head = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(body)
        for i in range(0, len(head + body), 1000):  # many small writes
            sock.sendall((head + body)[i : i + 1000])

    peers.append(peer := Peer(serve))
    wire = run.Wire("127.0.0.1", peer.port)
    first = wire.call("GET", "/a")
    second = wire.call("PUT", "/b", b'{"x": 1}')
    assert first[0] == second[0] == 200
    assert first[1].startswith(b'{"n": 1,') and len(first[1]) == len(second[1]) > 70000
    assert second[1].startswith(b'{"n": 2,')  # a new connection after "close"
    assert seen == [b"GET /a HTTP/1.1 ", b'PUT /b HTTP/1.1 {"x": 1}']
    wire.close()


def test_a_kept_connection_closed_unanswered_is_sent_again_once(peers: list[Peer]) -> None:
    def serve(sock: socket.socket, n: int) -> None:
        assert _request(sock)
        if n == 1:  # answers, keeps the connection, then drops the next
            sock.sendall(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")
            _request(sock)
        elif n == 2:  # answers the request sent again, and closes
            sock.sendall(b"HTTP/1.1 409 Conflict\r\nContent-Length: 2\r\n\r\nno")
        # n == 3: drops a request on a fresh connection

    peers.append(peer := Peer(serve))
    wire = run.Wire("127.0.0.1", peer.port)
    assert wire.call("GET", "/") == (204, b"")
    assert wire.call("GET", "/") == (409, b"no")  # sent again on connection 2
    # Dropped on the kept connection 2, sent again on 3 and dropped: no third try.
    assert wire.call("GET", "/") == (599, b"")
    assert peer.connections == 3
    wire.close()


def test_no_server_is_599() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    assert run.Wire("127.0.0.1", port, timeout=2).call("GET", "/") == (599, b"")
