"""The HTTP edge of ``berth serve``: gunicorn's sync worker, answering what
gunicorn refuses as Berth does.

gunicorn parses the request line and headers before Berth sees a request,
and answers what it refuses with its own HTML page, no request id and no
request-log line. Berth raises gunicorn's limits to what upstream
deployments accept (a URL of ``MAX_URL`` characters, header lines of
``HEADER_LINE_LIMIT`` bytes, ``HEADER_FIELDS`` headers), so ``EdgeMiddleware`` in
``berth.api.app`` judges everything within them; and ``EdgeWorker`` turns
what gunicorn still refuses (longer lines, more headers, a request it
cannot parse) into a Placement-format JSON error with a request id,
rendered and logged by that same ``EdgeMiddleware``.
"""

from __future__ import annotations

import logging
import select
import socket
import ssl
import time
from typing import Any

from gunicorn import util as gunicorn_util
from gunicorn.http import errors as http_errors
from gunicorn.http import message as http_message
from gunicorn.workers.sync import SyncWorker

from berth.api import errors
from berth.api.app import BODY_READ, HEADER_FIELDS, HEADER_LINE_LIMIT, MAX_URL

LOG = logging.getLogger("berth.server")

#: The longest request line gunicorn reads: a URL of ``MAX_URL``
#: characters with the longest method and the version around it.
REQUEST_LINE_LIMIT = MAX_URL + len("OPTIONS ") + len(" HTTP/1.1")

# gunicorn caps limit_request_line at its MAX_REQUEST_LINE (8190 bytes),
# short of an 8 KiB URL; the cap is read when each request is parsed, so
# raising it here (imported in the master, before the fork) lifts it.
if getattr(http_message, "MAX_REQUEST_LINE", REQUEST_LINE_LIMIT) < REQUEST_LINE_LIMIT:
    http_message.MAX_REQUEST_LINE = REQUEST_LINE_LIMIT


#: gunicorn's parse errors that are the client's fault, as Berth answers
#: them; the rest (a response header the app got wrong, proxy-protocol and
#: configuration problems) keep gunicorn's own answer.
_REFUSALS: list[tuple[tuple[type[Exception], ...], int, str]] = [
    (
        tuple(
            getattr(http_errors, name)
            for name in ("InvalidResponseHeader", "InvalidResponseHeaderName")
            if hasattr(http_errors, name)
        ),
        0,
        "",
    ),
    (
        (http_errors.LimitRequestLine,),
        414,
        "The request line is longer than %d bytes." % REQUEST_LINE_LIMIT,
    ),
    (
        (http_errors.LimitRequestHeaders,),
        431,
        "The request headers exceed %d bytes a line or %d lines."
        % (HEADER_LINE_LIMIT, HEADER_FIELDS),
    ),
    # Some of these are only in newer gunicorn releases.
    (
        tuple(
            getattr(http_errors, name)
            for name in (
                "InvalidRequestLine",
                "InvalidRequestMethod",
                "InvalidHTTPVersion",
                "InvalidHeader",
                "InvalidHeaderName",
                "ObsoleteFolding",
                "InvalidChunkSize",
                "ChunkMissingTerminator",
                "InvalidChunkExtension",
            )
            if hasattr(http_errors, name)
        ),
        400,
        "The request could not be parsed: %s",
    ),
]


def refusal(exc: BaseException) -> errors.HTTPProblem | None:
    """The Placement error for a request gunicorn could not read, or None
    for anything that is not the client's fault."""
    for kinds, status, detail in _REFUSALS:
        if isinstance(exc, kinds):
            if not status:
                return None
            if "%s" in detail:
                detail = detail % str(exc).splitlines()[0][:200]
            return errors.HTTPProblem(status, detail)
    return None


class EdgeWorker(SyncWorker):  # type: ignore[misc]
    """gunicorn's sync worker, answering unreadable requests through
    Berth's ``EdgeMiddleware`` (JSON body, request id, request-log line),
    and closing a connection as soon as its answer is sent when nothing
    of the request is left unread (:func:`close_when_read`)."""

    #: The WSGI environ of the request being answered.
    environ: dict[str, Any] | None = None

    def load_wsgi(self) -> None:
        super().load_wsgi()
        self.wsgi = _Noted(self)

    def handle_request(self, listener: Any, req: Any, client: Any, addr: Any) -> None:
        self.environ = None
        super().handle_request(listener, req, client, addr)
        environ, self.environ = self.environ, None
        if environ is not None and environ.get(BODY_READ):
            close_when_read(client)

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        problem = refusal(exc)
        if problem is None or not callable(getattr(self, "wsgi", None)):
            super().handle_error(req, client, addr, exc)
            return
        environ = {
            "REQUEST_METHOD": getattr(req, "method", None) or "-",
            "PATH_INFO": getattr(req, "path", None) or "-",
            "QUERY_STRING": "",
            "REMOTE_ADDR": (addr or ("-",))[0] or "-",
            "berth.refused": problem,
        }
        sent: dict[str, Any] = {}

        def start_response(
            status: str, headers: list[tuple[str, str]], exc_info: Any = None
        ) -> None:
            sent.update(status=status, headers=headers)

        body = b"".join(self.wsgi(environ, start_response))
        head = ["HTTP/1.1 %s" % sent["status"], "Connection: close"]
        head += ["%s: %s" % (k, v) for k, v in sent["headers"] if k.lower() != "connection"]
        try:
            client.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
        except OSError:
            self.log.debug("could not send the refusal to %s", addr)
            return
        if not hasattr(gunicorn_util, "close_graceful"):
            _linger(client)


class _Noted:
    """The worker's application, noting each request's environ on the
    worker; everything else (``state``, read by the serving hooks) is
    the application's."""

    def __init__(self, worker: EdgeWorker) -> None:
        self.worker = worker
        self.app: Any = worker.wsgi

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Any:
        self.worker.environ = environ
        return self.app(environ, start_response)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.app, name)


def close_when_read(client: socket.socket) -> None:
    """Close ``client`` now, its answer sent and its request (body
    included) read, unless bytes of a next request wait unread. gunicorn
    26 and later close every connection gracefully instead: a half-close,
    then up to 2 s reading until the client closes its end. That keeps a
    reset from destroying the answer when unread bytes remain, but holds
    the worker, which serves one connection at a time, until the client
    has read the answer and closed: a scheduler's whole turn on a busy
    machine (16 schedulers racing with 2 workers on 2 cores spent a
    third more CPU per claim, bench/journal/2026-12-06.md). With nothing
    unread, a plain close sends no reset. A TLS connection keeps
    gunicorn's close (its peek takes no flags)."""
    if isinstance(client, ssl.SSLSocket):
        return
    ready = select.poll()
    ready.register(client, select.POLLIN)
    try:
        # Readable: bytes wait, or the client closed its end (b"").
        waiting = client.recv(1, socket.MSG_PEEK) if ready.poll(0) else b""
    except OSError:
        return
    if not waiting:
        # gunicorn's close after this finds the socket closed (its
        # half-close fails, and it stops there).
        client.close()


def _linger(sock: socket.socket, seconds: float = 2.0, most: int = 65536) -> None:
    """Half-close ``sock`` and read off what the client is still sending
    (up to ``most`` bytes or ``seconds``), so that the kernel does not
    answer unread request bytes with a reset that destroys the refusal
    just sent (a 414 for a 70 kB URL, say). gunicorn 26 and later do this
    themselves after every request (``util.close_graceful``); before it,
    the refusal is closed here."""
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        return
    deadline = time.monotonic() + seconds
    read = 0
    while read < most:
        left = deadline - time.monotonic()
        if left <= 0:
            return
        try:
            sock.settimeout(left)
            data = sock.recv(4096)
        except OSError:
            return
        if not data:
            return
        read += len(data)
