"""Measuring requests in-process: ``Meter`` switches callgrind's
collection (and a CPU clock and a statement count) on around each
measured call, ``Client`` makes WSGI calls straight into the app
under it, and ``worker_app`` builds that app as a ``berth serve``
worker's (``writes.py``, ``million.py``)."""

from __future__ import annotations

import ctypes
import io
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import orjson
import sqlalchemy as sa

from berth import conf as berth_conf
from berth.api.app import create_app
from berth.db.engine import Database, create_engine
from berth.domain.allocation_candidate.cache import RefreshObserver
from berth.serve import preload

VERSION = "placement 1.39"

_HELPER = r"""
#include <valgrind/callgrind.h>
void berth_toggle(void) { CALLGRIND_TOGGLE_COLLECT; }
void berth_dump(const char *name) { CALLGRIND_DUMP_STATS_AT(name); }
"""


def worker_app(url: str, observers: Sequence[RefreshObserver] = (), memo: int | None = None) -> Any:
    """The application on ``url`` as a ``berth serve`` worker runs it: one
    request at a time, so its candidate cache brings its world up to
    date in place; ``noauth2``, no request log; ``observers`` hear each
    refresh; ``memo``, when given, is ``[berth] candidate_memo``."""
    conf = berth_conf.load([])
    conf.set_override("auth_strategy", "noauth2", group="api")
    conf.set_override("request_log", False, group="berth")
    if memo is not None:
        conf.set_override("candidate_memo", memo, group="berth")
    app = create_app(conf, Database(create_engine(url)), world_observers=observers)
    preload.after_fork(app, one_at_a_time=True)
    return app


class Meter:
    """Switches callgrind's collection around measured calls (a no-op
    outside valgrind: the client requests are then plain no-ops)."""

    def __init__(self) -> None:
        folder = Path(tempfile.mkdtemp(prefix="berth-cg-"))
        (folder / "t.c").write_text(_HELPER)
        subprocess.run(
            ["gcc", "-O1", "-shared", "-fPIC", "-o", str(folder / "t.so"), str(folder / "t.c")],
            check=True,
        )
        self.lib = ctypes.CDLL(str(folder / "t.so"))
        self.lib.berth_dump.argtypes = [ctypes.c_char_p]
        self.on = False
        self.cpu = 0.0
        #: Statements the measured calls ran (cursor executions: an
        #: ``executemany`` is one; BEGIN and COMMIT are not counted).
        self.statements = 0
        self._counting = False

    def count_statements(self) -> None:
        """Count the statements of the measured calls (not under
        valgrind: a listener puts SQLAlchemy on a slower path)."""
        sa.event.listen(sa.engine.Engine, "before_cursor_execute", self._count)

    def _count(self, *args: Any) -> None:
        if self._counting:
            self.statements += 1

    def start(self) -> None:
        if self.on:
            self._counting = True
            self.cpu -= time.process_time()
            self.lib.berth_toggle()

    def stop(self) -> None:
        if self.on:
            self.lib.berth_toggle()
            self.cpu += time.process_time()
            self._counting = False

    def dump(self, name: str) -> None:
        self.lib.berth_dump(name.encode())


class Client:
    """WSGI calls straight into the app, measured by ``meter``."""

    def __init__(self, app: Any, meter: Meter) -> None:
        self.app, self.meter = app, meter

    def __call__(self, method: str, path: str, body: Any = None, expect: int = 200) -> Any:
        raw = b"" if body is None else orjson.dumps(body)
        query = ""
        if "?" in path:
            path, query = path.split("?", 1)
        environ = {
            "REQUEST_METHOD": method,
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "SERVER_NAME": "berth.test",
            "SERVER_PORT": "80",
            "SERVER_PROTOCOL": "HTTP/1.1",
            "wsgi.url_scheme": "http",
            "wsgi.input": io.BytesIO(raw),
            "wsgi.errors": sys.stderr,
            "HTTP_X_AUTH_TOKEN": "admin",
            "HTTP_X_ROLES": "admin,service,member,reader",
            "HTTP_ACCEPT": "application/json",
            "HTTP_OPENSTACK_API_VERSION": VERSION,
        }
        if body is not None:
            environ["CONTENT_TYPE"] = "application/json"
            environ["CONTENT_LENGTH"] = str(len(raw))
        status: list[str] = []
        self.meter.start()
        out = b"".join(self.app(environ, lambda s, h, e=None: status.append(s)))
        self.meter.stop()
        code = int(status[0].split()[0])
        if code != expect:
            raise RuntimeError("%s %s: %s %r" % (method, path, status[0], out[:300]))
        return orjson.loads(out) if out else None
