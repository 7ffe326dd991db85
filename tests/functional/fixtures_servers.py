"""Fixtures of the functional tests that run processes (tests/README.md):
``berth serve`` servers, the Galera cluster, systemd's notify socket, a
TLS certificate, the uWSGI and Apache deployments. A plugin of
tests/conftest.py (``pytest_plugins``).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from berth.api.app import create_app
from berth.db.engine import Database, create_engine
from berth.serve import systemd
from support import galera
from support import galera_load as load
from support.app_client import Client, make_conf
from support.deploy import APACHE, APACHE_MODULES, APACHE_VENV, UWSGI, missing, python_of_mod_wsgi
from support.galera import Cluster, GaleraError
from support.processes import Server, free_port, start_berth, stop_berth, stop_group, wait_ready
from tests.conftest import reset


def _noauth_conf(tmp_path: Path, db_url: str) -> Path:
    """A placement.conf of noauth2 on ``db_url``, without request logs."""
    conf = tmp_path / "placement.conf"
    conf.write_text(
        "[api]\nauth_strategy = noauth2\n"
        "[placement_database]\nconnection = %s\n"
        "[berth]\nrequest_log = false\n" % db_url
    )
    return conf


def _serve(conf: Path, log: Path, workers: int) -> tuple[str, subprocess.Popen[bytes]]:
    """``berth serve`` of ``conf`` on a free port in a session of its own
    (``stop_group`` stops it with its workers), its stderr in ``log``;
    its URL and process, once it answers."""
    port = free_port()
    berth = Path(sys.executable).with_name("berth")
    with open(log, "wb") as sink:
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
                str(workers),
            ],
            stdout=subprocess.DEVNULL,
            stderr=sink,
            start_new_session=True,
        )
    url = "http://127.0.0.1:%d" % port
    try:
        wait_ready(url, proc)
    except BaseException:
        stop_group(proc)
        raise
    return url, proc


# -- test_allocation_candidate_cache_concurrency.py ---------------------------
@pytest.fixture(params=[2, 8], ids=["2-workers", "8-workers"])
def cache_servers(
    db_url: str, tmp_path: Path, request: pytest.FixtureRequest
) -> Iterator[list[str]]:
    engine = create_engine(db_url)
    reset(engine)
    engine.dispose()
    conf = _noauth_conf(tmp_path, db_url)
    procs, urls = [], []
    try:
        for n in range(2):
            url, proc = _serve(conf, tmp_path / ("server%d.log" % n), request.param)
            procs.append(proc)
            urls.append(url)
        yield urls
    finally:
        for proc in procs:
            stop_group(proc)


# -- test_claim_concurrency.py ------------------------------------------------
@pytest.fixture
def claim_server(db_url: str, tmp_path: Path) -> Iterator[tuple[str, Database]]:
    """A two-worker ``berth serve`` on a clean database; its URL and db."""
    engine = create_engine(db_url)
    reset(engine)
    try:
        url, proc = _serve(_noauth_conf(tmp_path, db_url), tmp_path / "server.log", 2)
    except BaseException:
        engine.dispose()
        raise
    try:
        yield url, Database(engine)
    finally:
        stop_group(proc)
        engine.dispose()


# -- test_galera.py and test_galera_change.py ---------------------------------
@pytest.fixture(scope="session")
def galera_cluster() -> Iterator[Cluster]:
    """The running cluster. One already running (started by
    ``.ci/galera.sh``) is reused and left running; one started here is
    stopped at the end. When it cannot start the tests skip, or fail
    under ``BERTH_REQUIRE_DBS=1``."""
    require = os.environ.get("BERTH_REQUIRE_DBS") == "1"
    cluster = Cluster()
    try:
        with galera.turn():
            started_here = not cluster.running()
            cluster.start()
    except (GaleraError, OSError, subprocess.SubprocessError) as exc:
        msg = "Galera cluster could not start: %s" % exc
        if require:
            pytest.fail(msg + "; BERTH_REQUIRE_DBS=1 needs it", pytrace=False)
        pytest.skip(msg)
    try:
        yield cluster
    finally:
        if started_here:
            with galera.turn():
                cluster.stop()


@pytest.fixture
def galera_db(galera_cluster: Cluster) -> Iterator[list[str]]:
    """A fresh migrated database on the cluster: one URL per node. The
    test has the cluster alone (``galera.turn``: another pytest-xdist
    worker's Galera test waits), complete (started again if another
    worker's session stopped the cluster it had started)."""
    with galera.turn():
        galera_cluster.start()
        with load.fresh_database(galera_cluster) as urls:
            yield urls


@pytest.fixture
def galera_nodes(galera_db: list[str]) -> Iterator[list[Client]]:
    """One in-process Berth app per node, each with its own engine."""
    dbs = [Database(create_engine(url)) for url in galera_db]
    clients = [Client(create_app(make_conf(), db)) for db in dbs]
    try:
        yield clients
    finally:
        for client, db in zip(clients, dbs, strict=True):
            client.close()
            db.engine.dispose()


# -- test_serve_deploy.py -----------------------------------------------------
@pytest.fixture
def notify_socket() -> Iterator[tuple[socket.socket, str]]:
    """A datagram socket listening as systemd's would, on an abstract
    address (``@...``, as systemd gives one to user services)."""
    name = "@berth-test-%s" % uuid.uuid4().hex
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    sock.bind(systemd.socket_address(name))
    yield sock, name
    sock.close()


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key."""
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command")
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=127.0.0.1",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return cert, key


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A folder whose socket paths fit in sun_path (pytest's may not)."""
    folder = Path(tempfile.mkdtemp(prefix="berth-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


# -- test_serve.py ------------------------------------------------------------
@pytest.fixture(scope="module")
def serve_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start_berth(tmp_path_factory.mktemp("serve"), "--workers", "1")
    srv.wait_log("serving Placement API")
    yield srv
    stop_berth(srv)


# -- test_wsgi_deploy.py (the deployments .ci/deploy.sh installs) -------------
@pytest.fixture
def uwsgi_binary() -> Path:
    if not UWSGI.exists():
        missing("uWSGI is not installed in this venv (%s)" % UWSGI)
    return UWSGI


@pytest.fixture
def apache_venv() -> Path:
    """``.apache-venv``, checked to hold the Python mod_wsgi embeds."""
    if not APACHE.exists() or not (APACHE_MODULES / "mod_wsgi.so").exists():
        missing(
            "Apache httpd or Debian's mod_wsgi is not installed "
            "(apt-get install apache2 libapache2-mod-wsgi-py3)"
        )
    if not (APACHE_VENV / "bin" / "berth").exists():
        missing("no venv of Debian's python3 with Berth at %s" % APACHE_VENV)
    embedded = python_of_mod_wsgi()
    assert embedded and (APACHE_VENV / "lib" / embedded).is_dir(), (
        "mod_wsgi embeds %s, but %s is not a venv of it: run "
        "`bash .ci/deploy.sh` again" % (embedded or "no Python", APACHE_VENV)
    )
    return APACHE_VENV


@pytest.fixture
def apache_folder() -> Iterator[Path]:
    """A folder Apache's daemon user may use: mod_wsgi refuses to run
    Python as root, and pytest's own folders are root's alone."""
    folder = Path(tempfile.mkdtemp(prefix="berth-apache-"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
