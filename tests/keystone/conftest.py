"""Fixtures for the tests against a real Keystone (see ``support/keystone.py``).

One Keystone serves the whole session. Without its venv these tests skip,
saying why; with ``BERTH_REQUIRE_DBS=1`` (CI) they fail instead.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy as sa

from berth import conf as berth_conf
from berth.api.app import create_app
from berth.db import migrate
from berth.db.engine import Database, create_engine
from support import keystone as harness
from support.change_watch import FeedServer, close_streams
from support.keystone import Keystone
from support.processes import free_port
from tests.conftest import REQUIRE, Client, reset

#: [oslo_policy] settings of the two policy modes.
MODES = {
    "legacy": {"enforce_new_defaults": False, "enforce_scope": False},
    "secure": {"enforce_new_defaults": True, "enforce_scope": True},
}


def _unavailable(exc: Exception) -> None:
    msg = "real Keystone unavailable: %s" % exc
    if REQUIRE:
        pytest.fail(msg + "; BERTH_REQUIRE_DBS=1 needs it", pytrace=False)
    pytest.skip(msg)


@pytest.fixture(scope="session")
def keystone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Keystone]:
    """The session's Keystone, populated; ``placement_port`` is the port
    its catalog names for Placement (free for a test's Berth server)."""
    placement_port = free_port()
    try:
        ks = Keystone.create(tmp_path_factory.mktemp("keystone"))
    except harness.KeystoneUnavailable as exc:
        _unavailable(exc)
        raise
    try:
        harness.populate(ks, "http://127.0.0.1:%d" % placement_port)
        ks.ids["placement_port"] = str(placement_port)
        yield ks
    finally:
        ks.stop()


@pytest.fixture(scope="session")
def other_keystone(
    keystone: Keystone, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Keystone]:
    """A second Keystone with the same users, projects and ids but its own
    database and fernet keys: an issuer the session's Keystone does not
    know, and one the outage test may stop and start."""
    ks = Keystone.create(tmp_path_factory.mktemp("keystone-other"), new_keys=True)
    try:
        harness.populate(ks, "http://127.0.0.1:%s" % keystone.ids["placement_port"])
        yield ks
    finally:
        ks.stop()


@pytest.fixture(scope="session")
def memcached(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A memcached of our own on a free loopback port: ``host:port``."""
    binary = shutil.which("memcached") or "/usr/bin/memcached"
    if not Path(binary).exists():
        _unavailable(RuntimeError("no memcached binary: install it with apt-get install memcached"))
    port = free_port()
    proc = subprocess.Popen(
        [binary, "-l", "127.0.0.1", "-p", str(port), "-U", "0", "-m", "16", "-u", "root"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        for _ in range(100):
            try:
                memcached_stats("127.0.0.1:%d" % port)
                break
            except OSError:
                time.sleep(0.05)
        yield "127.0.0.1:%d" % port
    finally:
        proc.terminate()
        proc.wait(10)


def memcached_stats(server: str) -> dict[str, int]:
    """memcached's numeric ``stats`` counters."""
    host, _, port = server.partition(":")
    with socket.create_connection((host, int(port)), timeout=5) as s:
        s.sendall(b"stats\r\n")
        data = b""
        while not data.endswith(b"END\r\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    stats = {}
    for line in data.decode().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == "STAT" and parts[2].isdigit():
            stats[parts[1]] = int(parts[2])
    return stats


@pytest.fixture(scope="session")
def tokens(keystone: Keystone) -> dict[str, str]:
    """One token per persona of the policy matrix."""
    return {
        "admin": keystone.admin_token(),
        "sysadmin": keystone.token("admin", harness.ADMIN_PASSWORD, system=True),
        "nova": keystone.token("nova", project="service"),
        "alice": keystone.token("alice", project="tenant-a"),
        "abby": keystone.token("abby", project="tenant-a"),
        "bob": keystone.token("bob", project="tenant-b"),
        "bert": keystone.token("bert", project="tenant-b"),
        "sysreader": keystone.token("sysreader", system=True),
        "norole": keystone.token("norole"),
    }


def write_conf(
    path: Path,
    ks: Keystone,
    db_url: str,
    *,
    mode: str = "legacy",
    memcached: str | None = None,
    extra: str = "",
) -> Path:
    """An upstream-style placement.conf for Berth behind ``ks``."""
    auth = harness.authtoken_conf(ks)
    lines = [
        "[placement_database]",
        "connection = %s" % db_url,
        "[api]",
        "auth_strategy = keystone",
        "[keystone_authtoken]",
    ]
    lines += ["%s = %s" % kv for kv in auth.items()]
    if memcached:
        lines.append("memcached_servers = %s" % memcached)
    lines.append("[oslo_policy]")
    lines += ["%s = %s" % kv for kv in MODES[mode].items()]
    path.write_text("\n".join(lines) + "\n" + extra)
    return path


@pytest.fixture(scope="session")
def sqlite_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[sa.engine.Engine]:
    path = tmp_path_factory.mktemp("auth-sqlite") / "placement.sqlite"
    engine = create_engine("sqlite:///%s" % path)
    migrate.upgrade(engine)
    yield engine
    engine.dispose()


@pytest.fixture
def sqlite_db(sqlite_engine: sa.engine.Engine) -> Database:
    """A clean SQLite database, for the tests whose subject is the token
    and not the storage: they run once, not once per backend."""
    reset(sqlite_engine)
    return Database(sqlite_engine)


@pytest.fixture
def keystone_app(
    keystone: Keystone, request: pytest.FixtureRequest, tmp_path: Path
) -> Callable[..., Any]:
    """``keystone_app(mode="legacy", memcached=None, ks=None, db=None)``:
    Berth's WSGI app behind the session's Keystone (or ``ks``), on ``db``
    (default: the ``db`` fixture, once per backend)."""

    def make(
        mode: str = "legacy",
        memcached: str | None = None,
        ks: Keystone | None = None,
        db: Database | None = None,
    ) -> Any:
        if db is None:
            db = request.getfixturevalue("db")
        path = write_conf(
            tmp_path / ("placement-%s.conf" % mode),
            ks or keystone,
            db.engine.url.render_as_string(hide_password=False),
            mode=mode,
            memcached=memcached,
        )
        conf = berth_conf.load(["--config-file", str(path)])
        return create_app(conf, db)

    return make


def client(app: Any, token: str | None) -> Client:
    """An in-process client sending ``token`` (none: no header)."""
    c = Client(app)
    c.headers.pop("x-auth-token")
    if token is not None:
        c.headers["x-auth-token"] = token
    return c


@contextlib.contextmanager
def serving(keystone: Keystone, db: Database, tmp_path: Path) -> Iterator[str]:
    """``berth serve`` (secure RBAC) on the port the catalog names."""
    port = int(keystone.ids["placement_port"])
    conf = write_conf(
        tmp_path / "placement.conf",
        keystone,
        db.engine.url.render_as_string(hide_password=False),
        mode="secure",
    )
    berth = Path(sys.executable).with_name("berth")
    with open(tmp_path / "berth.log", "wb") as log:
        proc = subprocess.Popen(
            [
                str(berth),
                "serve",
                "--config-file",
                str(conf),
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--workers",
                "1",
            ],
            stdout=log,
            stderr=log,
        )
    url = "http://127.0.0.1:%d" % port
    try:
        with httpx.Client() as http:
            for _ in range(300):
                assert proc.poll() is None, (tmp_path / "berth.log").read_text()
                try:
                    if http.get(url + "/").status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture
def berth_server(keystone: Keystone, db: Database, tmp_path: Path) -> Iterator[str]:
    """Once per backend: the report client's writes and reshape."""
    with serving(keystone, db, tmp_path) as url:
        yield url


@pytest.fixture
def sqlite_server(keystone: Keystone, sqlite_db: Database, tmp_path: Path) -> Iterator[str]:
    """Once: the CLI's part is authentication and the catalog."""
    with serving(keystone, sqlite_db, tmp_path) as url:
        yield url


# -- test_change_watch_keystone.py -------------------------------------------
@pytest.fixture
def watch_server(keystone: Keystone, sqlite_db: Any, tmp_path: Any) -> Any:
    path = write_conf(
        tmp_path / "placement.conf",
        keystone,
        sqlite_db.engine.url.render_as_string(hide_password=False),
        mode="secure",
    )
    server = FeedServer(berth_conf.load(["--config-file", str(path)]), sqlite_db)
    yield server
    close_streams()
    server.close()
