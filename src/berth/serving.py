"""What ``berth serve`` adds to gunicorn: the HTTP edge and the life cycle.

The edge. gunicorn parses the request line and headers before Berth sees
a request, and answers what it refuses with its own HTML page, no request
id and no request-log line. Berth raises gunicorn's limits to what
upstream deployments accept (a URL of ``MAX_URL`` characters, header
lines of ``HEADER_LINE_LIMIT`` bytes, ``HEADER_FIELDS`` headers), so
``Edge`` in ``berth.api.app`` judges everything within them; and
``EdgeWorker`` turns what gunicorn still refuses (longer lines, more
headers, a request it cannot parse) into a Placement-format JSON error
with a request id, rendered and logged by that same ``Edge``.

The life cycle. "serving ..." is logged once the port is bound
(``when_ready``); SIGTERM is logged, and gunicorn's graceful stop lets
in-flight requests finish for up to ``GRACEFUL_TIMEOUT`` seconds.

Memory. The workers share the world the master loaded (``berth.preload``)
only until they touch it: CPython writes a reference count into every
object a request reads, so each page of the world a worker reads becomes
its own copy, and a structural change makes each worker rebuild the
world's indexes privately. ``Recycler`` (gunicorn's ``post_request``) reads
a worker's private memory every ``MEMORY_CHECK_SECONDS``; past ``[berth]
worker_private_memory`` the worker finishes its request and exits, and
the master brings its own world up to date before it forks the
replacement (``pre_fork``: ``preload.refresh``), which shares it again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from gunicorn.arbiter import Arbiter
from gunicorn.http import errors as http_errors
from gunicorn.http import message as http_message
from gunicorn.workers.sync import SyncWorker

from berth.api import errors
from berth.api.app import HEADER_FIELDS, HEADER_LINE_LIMIT, MAX_URL

LOG = logging.getLogger("berth.server")

#: The longest request line gunicorn reads: a URL of ``MAX_URL``
#: characters with the longest method and the version around it.
REQUEST_LINE_LIMIT = MAX_URL + len("OPTIONS ") + len(" HTTP/1.1")
#: Seconds in-flight requests get to finish after SIGTERM.
GRACEFUL_TIMEOUT = 30

# gunicorn caps limit_request_line at its MAX_REQUEST_LINE (8190 bytes),
# short of an 8 KiB URL; the cap is read when each request is parsed, so
# raising it here (imported in the master, before the fork) lifts it.
if getattr(http_message, "MAX_REQUEST_LINE", REQUEST_LINE_LIMIT) < REQUEST_LINE_LIMIT:
    http_message.MAX_REQUEST_LINE = REQUEST_LINE_LIMIT


def gunicorn_options(host: str, port: int, workers: int) -> dict[str, Any]:
    """gunicorn settings for ``berth serve``."""
    return {
        "bind": "%s:%d" % (host, port),
        "workers": workers,
        "worker_class": "berth.serving.EdgeWorker",
        "timeout": 120,
        "graceful_timeout": GRACEFUL_TIMEOUT,
        "keepalive": 5,
        "limit_request_line": REQUEST_LINE_LIMIT,
        # gunicorn counts the line's CRLF; Berth's limit is the line itself.
        "limit_request_field_size": HEADER_LINE_LIMIT + 2,
        "limit_request_fields": HEADER_FIELDS,
        "accesslog": None,
        "errorlog": "-",
        "loglevel": "warning",
        "proc_name": "berth",
        "when_ready": _when_ready,
        "on_exit": _on_exit,
    }


def _when_ready(arbiter: Arbiter) -> None:
    addresses = ", ".join(str(listener)
                          for listener in arbiter.LISTENERS)
    LOG.info("serving Placement API on %s with %d worker(s)", addresses,
             arbiter.num_workers)


def _on_exit(arbiter: Arbiter) -> None:
    LOG.info("stopped")


class BerthArbiter(Arbiter):  # type: ignore[misc]
    """gunicorn's master, saying when it was asked to stop."""

    def handle_term(self) -> None:
        LOG.info("SIGTERM received: no new connections; in-flight requests "
                 "get up to %ds to finish", self.cfg.graceful_timeout)
        super().handle_term()


#: gunicorn's parse errors that are the client's fault, as Berth answers
#: them; the rest (a response header the app got wrong, proxy-protocol and
#: configuration problems) keep gunicorn's own answer.
_REFUSALS: list[tuple[tuple[type[Exception], ...], int, str]] = [
    (tuple(getattr(http_errors, name) for name in (
        "InvalidResponseHeader", "InvalidResponseHeaderName")
        if hasattr(http_errors, name)), 0, ""),
    ((http_errors.LimitRequestLine,), 414,
     "The request line is longer than %d bytes." % REQUEST_LINE_LIMIT),
    ((http_errors.LimitRequestHeaders,), 431,
     "The request headers exceed %d bytes a line or %d lines."
     % (HEADER_LINE_LIMIT, HEADER_FIELDS)),
    # Some of these are only in newer gunicorn releases.
    (tuple(getattr(http_errors, name) for name in (
        "InvalidRequestLine", "InvalidRequestMethod", "InvalidHTTPVersion",
        "InvalidHeader", "InvalidHeaderName", "ObsoleteFolding",
        "InvalidChunkSize", "ChunkMissingTerminator", "InvalidChunkExtension")
        if hasattr(http_errors, name)), 400,
     "The request could not be parsed: %s"),
]


#: Seconds between two readings of a worker's private memory (a reading
#: walks the process's page tables: about 4 ms at 50,000 hosts).
MEMORY_CHECK_SECONDS = 5.0
#: The least automatic ``[berth] worker_private_memory``, MiB: below it a
#: worker's own memos and buffers alone would make it churn.
MIN_PRIVATE_MEMORY = 64
_MIB = 1024 * 1024


def memory() -> tuple[int, int] | None:
    """This process's resident memory in bytes: (private, shared with
    other processes); None where Linux's ``/proc/self/smaps_rollup`` is
    not."""
    try:
        with open("/proc/self/smaps_rollup", encoding="ascii") as f:
            text = f.read()
    except OSError:
        return None
    kib: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        if len(fields) == 2 and fields[1] == "kB":
            kib[key] = int(fields[0])
    return ((kib.get("Private_Clean", 0) + kib.get("Private_Dirty", 0))
            * 1024,
            (kib.get("Shared_Clean", 0) + kib.get("Shared_Dirty", 0))
            * 1024)


class Recycler:
    """gunicorn's ``post_request`` hook: a worker whose private memory
    passes the limit finishes this request and exits (gunicorn's master
    then forks a fresh one).

    ``limit_mib`` None sets the limit at the first reading in each worker:
    a third of what it shares then (S: the master's world and modules),
    at least ``MIN_PRIVATE_MEMORY``. Eight workers at the limit hold
    S + 8·S/3, under three times the S + S/3 of one worker at it; what
    serving copies in steady use (50 MB at 50,000 hosts, where S is 230
    MB) stays below it, so workers are replaced for what accumulates: a
    whole load, patched indexes, hours of claims. One instance is made in
    the master; each forked worker has its own copy of its state.
    """

    def __init__(self, limit_mib: int | None,
                 every: float = MEMORY_CHECK_SECONDS,
                 read: Callable[[], tuple[int, int] | None] = memory
                 ) -> None:
        self.limit_mib = limit_mib
        self.every = every
        self.read = read
        #: bytes, once known in this worker
        self.limit: int | None = None
        self._next = 0.0

    def __call__(self, worker: Any, req: Any = None, environ: Any = None,
                 resp: Any = None) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self.every
        found = self.read()
        if found is None:
            self._next = float("inf")  # not Linux: nothing to read
            return
        private, shared = found
        if self.limit is None:
            self.limit = (self.limit_mib * _MIB if self.limit_mib else
                          max(MIN_PRIVATE_MEMORY * _MIB, shared // 3))
        metrics = getattr(getattr(getattr(worker, "wsgi", None), "state",
                                  None), "metrics", None)
        if metrics is not None:
            metrics.worker_private_bytes.set(private)
        if private > self.limit and worker.alive:
            LOG.info("worker %s: %d MiB of private memory is over the "
                     "limit of %d MiB ([berth] worker_private_memory): "
                     "exiting after this request; the master forks a "
                     "replacement that shares its world", worker.pid,
                     private // _MIB, self.limit // _MIB)
            worker.alive = False
            if metrics is not None:
                metrics.worker_recycles.inc()


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
    Berth's ``Edge`` (JSON body, request id, request-log line)."""

    def handle_error(self, req: Any, client: Any, addr: Any,
                     exc: BaseException) -> None:
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

        def start_response(status: str, headers: list[tuple[str, str]],
                           exc_info: Any = None) -> None:
            sent.update(status=status, headers=headers)

        body = b"".join(self.wsgi(environ, start_response))
        head = ["HTTP/1.1 %s" % sent["status"], "Connection: close"]
        head += ["%s: %s" % (k, v) for k, v in sent["headers"]
                 if k.lower() != "connection"]
        try:
            client.sendall(("\r\n".join(head) + "\r\n\r\n").encode("latin-1")
                           + body)
        except OSError:
            self.log.debug("could not send the refusal to %s", addr)
