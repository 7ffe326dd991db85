"""Berth as a user runs it: the ``berth`` command and ``berth serve`` as
subprocesses, on free loopback ports.

``run`` runs one command to completion; a server is started by the test
(its options differ), then ``wait_ready`` waits for its first answer and
``stop_group`` (for a server started with ``start_new_session=True``)
stops it with its workers. ``Server`` reads a running server's log and
talks to it over raw sockets. ``start_berth`` and ``stop_berth`` run
``berth serve`` on the embedded database of a folder and stop it.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

#: ``berth`` of the running interpreter, without relying on its script.
BERTH = [sys.executable, "-m", "berth.cli"]


def run(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """``berth *args`` to completion; its exit status and text output."""
    return subprocess.run(
        [*BERTH, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
    )


def free_port() -> int:
    """A loopback TCP port nobody listens on (at the time of asking)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def two_free_ports() -> int:
    """A port whose next port is free too (the API's and the feed's)."""
    while True:
        port = free_port()
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
        return port


def wait_ready(url: str, proc: subprocess.Popen[bytes], timeout: float = 60) -> bytes:
    """The body of the first 2xx answer of GET ``url``, polled until
    ``proc`` serves it. Raises RuntimeError when ``proc`` exits first
    (with its stderr, when piped) or after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            err = proc.stderr.read() if proc.stderr else b""
            raise RuntimeError(
                "server exited with %s: %s" % (proc.returncode, err.decode(errors="replace"))
            )
        try:
            with urllib.request.urlopen(url, timeout=1) as resp:
                return bytes(resp.read())
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("server did not answer %s in %d s" % (url, timeout))


def stop_group(proc: subprocess.Popen[bytes]) -> None:
    """Stop a ``berth serve`` started in its own session, with its
    workers: SIGTERM, then SIGKILL after 20 s. A group already gone (a
    server that exited on its own) is only reaped."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(20)
    except ProcessLookupError:
        proc.wait()
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def serve(
    folder: Path, port: int, *args: str, env: dict[str, str], argv: list[str] = BERTH
) -> Server:
    """``berth serve *args`` started in ``folder`` with environment
    ``env``, its stderr in ``folder/serve.log``; ``port`` is the one the
    returned ``Server`` talks to (``args`` should say it). ``argv``: the
    command that stands for ``berth``."""
    log = folder / "serve.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [*argv, "serve", *args], stderr=sink, stdout=subprocess.DEVNULL, env=env, cwd=folder
        )
    return Server(proc, port, log)


class Server:
    """A running ``berth serve`` whose stderr goes to ``log``."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.proc, self.port, self.log = proc, port, log

    def log_text(self) -> str:
        return self.log.read_text()

    def wait_log(self, pattern: str, timeout: float = 60) -> str:
        """The whole log once ``pattern`` appears in it. Raises
        AssertionError when the server exits first or after ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            text = self.log_text()
            if re.search(pattern, text):
                return text
            if self.proc.poll() is not None:
                raise AssertionError("server exited:\n" + text)
            time.sleep(0.05)
        raise AssertionError("no %r in the log:\n%s" % (pattern, self.log_text()))

    def raw(self, data: bytes) -> tuple[str, dict[str, str], bytes]:
        """Send ``data`` on a fresh connection; the status line, headers
        and body of the answer."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=30) as s:
            s.sendall(data)
            reply = b""
            while chunk := s.recv(65536):
                reply += chunk
        head, _, body = reply.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
        return lines[0], headers, body


def start_berth(
    tmp_path: Path, *extra: str, env: dict[str, str] | None = None, argv: list[str] = BERTH
) -> Server:
    """``berth serve *extra`` in ``tmp_path``, its stderr in serve.log;
    ``env`` replaces the environment (default: this one, with the
    embedded database in ``tmp_path``); ``argv``: the command that stands
    for ``berth``."""
    port = free_port()
    if env is None:
        env = {
            **os.environ,
            "BERTH_DATA_DIR": str(tmp_path / "data"),
            "OS_PLACEMENT_CONFIG_DIR": "",
        }
    return serve(tmp_path, port, "--port", str(port), *extra, env=env, argv=argv)


def stop_berth(server: Server) -> int:
    if server.proc.poll() is None:
        server.proc.send_signal(signal.SIGTERM)
    return server.proc.wait(timeout=60)
