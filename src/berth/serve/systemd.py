"""``berth serve`` under systemd (``Type=notify``): what the master tells
the service manager, as sd_notify(3) defines the datagrams.

- ``READY=1`` once the world is loaded and every worker of the
  generation has booted (its application loaded, about to accept).
- ``RELOADING=1`` with ``MONOTONIC_USEC`` (what systemd 253's
  ``Type=notify-reload`` checks) when SIGHUP starts a reload, then
  ``READY=1`` again once the new generation of workers has booted.
- ``STOPPING=1`` when the master starts to stop.

Nothing is sent, and no pipe made, without ``NOTIFY_SOCKET``.

gunicorn sends ``READY=1`` itself when its master has bound its sockets
(every release Berth supports), before any worker has booted, and its
workers and the change feed's process would inherit the variable.
:meth:`Notifier.from_environ` takes ``NOTIFY_SOCKET`` out of the
environment before gunicorn starts, as sd_notify's ``unset_environment``
does: gunicorn, whatever its release, finds nothing to notify, and only
the master (``NotifyAccess=main``) speaks.

A worker says it booted by writing its pid to a pipe the master made
before forking (gunicorn's ``post_worker_init``); the master reads the
pipe from its loop, which runs at least once a second.

Nothing here imports gunicorn.
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Collection, MutableMapping

LOG = logging.getLogger("berth.server")

#: The variable systemd sets for a ``Type=notify`` service.
NOTIFY_SOCKET = "NOTIFY_SOCKET"


def socket_address(value: str) -> str:
    """The ``AF_UNIX`` address of a ``NOTIFY_SOCKET`` value: a path, or an
    abstract name written with a leading ``@``."""
    return "\0" + value[1:] if value.startswith("@") else value


def monotonic_usec() -> int:
    """``CLOCK_MONOTONIC`` in microseconds, as ``MONOTONIC_USEC`` wants."""
    return time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000


class Notifier:
    """The master's messages to systemd, and the pipe on which workers
    say they booted. Inert (every method does nothing) without an
    address."""

    def __init__(self, address: str | None) -> None:
        self.address = address
        #: Whether ``READY=1`` is owed: at start and after each reload.
        self.pending = address is not None
        self.stopped = False
        self._booted: set[int] = set()
        self._partial = b""
        self._pipe = (-1, -1) if address is None else os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)

    @classmethod
    def from_environ(cls, environ: MutableMapping[str, str] | None = None) -> Notifier:
        """A notifier for ``NOTIFY_SOCKET``, taken out of ``environ``
        (default: this process's) so that neither gunicorn nor any
        process forked later sees it."""
        environ = os.environ if environ is None else environ
        return cls(environ.pop(NOTIFY_SOCKET, None) or None)

    def send(self, *fields: str) -> None:
        """One datagram of ``fields`` (``NAME=value``), one a line. A
        service manager that cannot be reached is logged, never fatal."""
        if self.address is None:
            return
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                sock.connect(socket_address(self.address))
                sock.sendall("\n".join(fields).encode())
        except OSError as exc:
            LOG.warning("could not notify systemd at %s: %s", self.address, exc)

    def booted(self, worker: object) -> None:
        """In a worker (gunicorn's ``post_worker_init``): tell the master
        this worker booted. ``worker`` is gunicorn's, unused."""
        if self.address is None:
            return
        try:  # a pid and a newline: one atomic write, under PIPE_BUF
            os.write(self._pipe[1], b"%d\n" % os.getpid())
        except OSError:  # a full pipe: the master reads it every second
            pass

    def check(self, workers: Collection[int], wanted: int, status: str = "") -> None:
        """In the master's loop: ``READY=1`` (with ``STATUS=status``) once,
        when ``READY=1`` is owed and the live ``workers`` are ``wanted``
        many, every one booted."""
        if self.address is None:
            return
        self._read_pipe()
        self._booted &= set(workers)
        if (
            self.pending
            and not self.stopped
            and len(workers) == wanted
            and self._booted >= set(workers)
        ):
            self.pending = False
            self.send("READY=1", *(["STATUS=" + status] if status else []))

    def _read_pipe(self) -> None:
        data = self._partial
        while True:
            try:
                chunk = os.read(self._pipe[0], 4096)
            except BlockingIOError:
                break
            if not chunk:
                break
            data += chunk
        *lines, self._partial = data.split(b"\n")
        self._booted.update(int(line) for line in lines if line.isdigit())

    def reloading(self) -> None:
        """SIGHUP: a reload starts; ``READY=1`` is owed again."""
        if self.address is None or self.stopped:
            return
        self.pending = True
        self.send("RELOADING=1", "MONOTONIC_USEC=%d" % monotonic_usec(), "STATUS=reloading")

    def stopping(self) -> None:
        """The master stops (once, whatever the path)."""
        if self.address is None or self.stopped:
            return
        self.stopped = True
        self.send("STOPPING=1", "STATUS=stopping")
