"""``berth.wsgi:application`` under the servers of ``deploy/``: uWSGI with
``deploy/uwsgi/berth.ini`` and Apache httpd with mod_wsgi and
``deploy/apache/berth.conf``, each served as written (only the paths, the
port, and Apache's user and processes replaced, in ``render``), on an
SQLite database made by ``berth db sync``. Each checks where the world
is loaded (uWSGI: once, in the master, before the fork; mod_wsgi: in
each daemon process as it starts), a claim and a candidates query, an
8 KiB URL, an over-large body (Berth's 413) and a graceful reload.
Covers ``berth.wsgi`` and ``berth.serve.preload`` under real servers.

uWSGI comes from the package index, into the venv running the tests
(``uwsgi`` beside this Python). Apache and mod_wsgi come from Debian's
packages; Debian's mod_wsgi embeds Debian's ``python3``, so Berth runs
there from ``.apache-venv``, a venv of that Python (``python-home=``).
``.ci/deploy.sh`` installs all three. Without them these tests skip,
saying so; with ``BERTH_REQUIRE_DEPLOY=1`` (CI) they fail instead. The
uWSGI test runs by default (about 6 s), Apache's under ``stress``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from support import api_setup, processes
from support.deploy import APACHE, APACHE_MODULES, APACHE_VENV, REPO_ROOT
from support.processes import free_port
from support.servers import UWSGI_INI, render

DEPLOY = REPO_ROOT / "deploy"
#: ``[berth] max_body_bytes``'s default, which the deploy files assume.
MAX_BODY = 10 * 1024 * 1024
#: mod_wsgi's daemon processes in the test, for a 2-core machine (the vhost
#: says 4): each loads a world of its own.
DAEMONS = 2
#: The line ``berth.serve.preload.warm`` logs; group 1 is the pid (oslo's
#: format), group 2 the providers loaded.
LOADED = re.compile(
    r"^\S+ \S+ (\d+) INFO berth\.server \[-\] candidate "
    r"cache: (\d+) providers loaded",
    re.M,
)
REQUEST = re.compile(r"^\S+ \S+ (\d+) INFO berth\.request ", re.M)
HEADERS = {"x-auth-token": "admin", "openstack-api-version": "placement 1.39"}


def synced_folder(folder: Path) -> None:
    """``folder/placement.conf`` (noauth2, SQLite in ``folder``) and its
    database, made by ``berth db sync`` as an operator would."""
    (folder / "placement.conf").write_text(
        "[api]\nauth_strategy = noauth2\n[placement_database]\n"
        "connection = sqlite:///%s\n" % (folder / "placement.sqlite")
    )
    out = processes.run("db", "sync", "--config-file", str(folder / "placement.conf"))
    assert out.returncode == 0, out.stderr


def loads(log: str) -> list[tuple[int, int]]:
    """(pid, providers) of each world loaded before serving, in order."""
    return [(int(pid), int(n)) for pid, n in LOADED.findall(log)]


def wait_for(check: Callable[[], bool], what: str, log: Path, timeout: float = 60) -> None:
    """Poll ``check()`` until true; fail with the server's log after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(
                "%s: not in %d s\n%s" % (what, timeout, log.read_text(errors="replace"))
            )
        time.sleep(0.1)


def serve_requests(base: str) -> None:
    """A provider, its inventory, a claim and a candidates query, an 8 KiB
    URL and an over-large body, through the server at ``base``."""
    with httpx.Client(base_url=base, headers=HEADERS, timeout=30) as c:
        rp_uuid = api_setup.make_provider(c, "cn1")
        api_setup.set_inventory(c, rp_uuid, {"VCPU": 8})
        api_setup.ok(api_setup.allocate(c, str(uuid.uuid4()), {rp_uuid: {"VCPU": 2}}), 204)
        found = c.get("/allocation_candidates", params={"resources": "VCPU:6"})
        assert found.status_code == 200, found.text
        summary = found.json()["provider_summaries"][rp_uuid]
        assert summary["resources"]["VCPU"] == {"capacity": 8, "used": 2}
        assert (
            c.get("/allocation_candidates", params={"resources": "VCPU:7"}).json()[
                "allocation_requests"
            ]
            == []
        )
        # 200 aggregates: a URL of 7.5 KiB passes the server's limits.
        member_of = "in:" + ",".join(str(uuid.uuid4()) for _ in range(200))
        long = c.get("/resource_providers", params={"member_of": member_of})
        assert long.status_code == 200, long.text
    status, body = too_large(base)
    assert status == 413, body
    assert b'"status":413' in body and b'"request_id":"req-' in body, body


def offers(base: str) -> int:
    """How many candidates the server at ``base`` offers for 6 VCPU."""
    with httpx.Client(base_url=base, headers=HEADERS, timeout=30) as c:
        found = c.get("/allocation_candidates", params={"resources": "VCPU:6"})
    assert found.status_code == 200, found.text
    return len(found.json()["allocation_requests"])


def too_large(base: str) -> tuple[int, bytes]:
    """POST a body one byte over ``MAX_BODY``; the status and body of the
    answer. ``Expect: 100-continue`` lets a server that answers from
    ``Content-Length`` alone do so before the body is sent."""
    host, port = base.removeprefix("http://").split(":")
    head = (
        "POST /resource_providers HTTP/1.1\r\nHost: %s\r\n"
        "X-Auth-Token: admin\r\nContent-Type: application/json\r\n"
        "Content-Length: %d\r\nExpect: 100-continue\r\n"
        "Connection: close\r\n\r\n" % (host, MAX_BODY + 1)
    )
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(head.encode())
        reply = s.recv(65536)
        if reply.startswith(b"HTTP/1.1 100"):
            reply = reply.partition(b"\r\n\r\n")[2]
            s.sendall(b" " * (MAX_BODY + 1))
        while chunk := s.recv(65536):
            reply += chunk
    status_line, _, rest = reply.partition(b"\r\n")
    return int(status_line.split()[1]), rest.partition(b"\r\n\r\n")[2]


# uWSGI --------------------------------------------------------------------


def test_uwsgi_serves_with_the_world_loaded_in_its_master(
    tmp_path: Path, uwsgi_binary: Path
) -> None:
    synced_folder(tmp_path)
    port = free_port()
    ini = tmp_path / "berth.ini"
    render(
        UWSGI_INI,
        ini,
        {
            "/opt/berth": sys.prefix,
            "/etc/placement": str(tmp_path),
            "http-socket = :8778": "http-socket = 127.0.0.1:%d" % port,
        },
    )
    log = tmp_path / "uwsgi.log"
    base = "http://127.0.0.1:%d" % port
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [str(uwsgi_binary), "--ini", str(ini)],
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        processes.wait_ready(base + "/", proc)
        # The world was loaded once, by the master, before any worker was
        # forked; the workers serve without loading their own.
        assert loads(log.read_text()) == [(proc.pid, 0)]
        serve_requests(base)
        workers = {int(p) for p in REQUEST.findall(log.read_text())}
        assert workers and proc.pid not in workers

        # SIGHUP: the master waits for its workers, loads berth.wsgi (and
        # the world, now with one provider) again in the same process and
        # forks new workers, on the port it kept open.
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: len(loads(log.read_text())) == 2, "reload", log)
        assert loads(log.read_text())[1] == (proc.pid, 1)
        processes.wait_ready(base + "/", proc)
        assert offers(base) == 1

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, log.read_text()
    finally:
        if proc.poll() is None:
            processes.stop_group(proc)


# Apache httpd and mod_wsgi -----------------------------------------------


def _httpd_conf(folder: Path, port: int) -> Path:
    """A server configuration of the few modules the vhost needs, then
    ``deploy/apache/berth.conf`` rendered for ``folder`` and ``port``."""
    root = os.geteuid() == 0
    render(
        DEPLOY / "apache" / "berth.conf",
        folder / "berth.conf",
        {
            "/opt/berth": str(APACHE_VENV),
            "8778": str(port),
            "processes=4": "processes=%d" % DAEMONS,
            "/var/log/apache2": str(folder),
            # As root Apache runs it as www-data (Debian's Apache user); as
            # anyone else, as that user.
            "user=placement group=placement": "user=www-data group=www-data" if root else "",
        },
    )
    conf = folder / "httpd.conf"
    conf.write_text(
        "\n".join(
            [
                "ServerRoot %s" % folder,
                "ServerName localhost",
                "PidFile %s/httpd.pid" % folder,
                "DefaultRuntimeDir %s" % folder,
                "ErrorLog %s/httpd-error.log" % folder,
                *(
                    "LoadModule %s_module %s/mod_%s.so" % (name, APACHE_MODULES, name)
                    for name in ("mpm_event", "authz_core", "wsgi")
                ),
                "WSGISocketPrefix %s/wsgi" % folder,
                *(["User www-data", "Group www-data"] if root else []),
                "Include %s/berth.conf" % folder,
                "",
            ]
        )
    )
    return conf


@pytest.mark.stress  # about 15 s: each daemon process loads Berth twice
def test_apache_mod_wsgi_serves_with_the_world_loaded_at_start(
    apache_venv: Path, apache_folder: Path
) -> None:
    synced_folder(apache_folder)
    shutil.copy(DEPLOY / "apache" / "berth.wsgi", apache_venv / "berth.wsgi")
    port = free_port()
    conf = _httpd_conf(apache_folder, port)
    if os.geteuid() == 0:
        shutil.chown(apache_folder, "www-data", "www-data")
        for path in apache_folder.iterdir():
            shutil.chown(path, "www-data", "www-data")
    log = apache_folder / "berth-error.log"
    base = "http://127.0.0.1:%d" % port
    env = {**os.environ, "OS_PLACEMENT_CONFIG_DIR": str(apache_folder)}
    with (apache_folder / "httpd-stderr.log").open("wb") as sink:
        proc = subprocess.Popen(
            [str(APACHE), "-f", str(conf), "-DFOREGROUND"],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        # Each daemon process loads its world as it starts, before it
        # serves (mod_wsgi forks them before importing Berth).
        wait_for(
            lambda: log.exists() and len({p for p, _ in loads(log.read_text())}) == DAEMONS,
            "a load in each daemon",
            log,
        )
        processes.wait_ready(base + "/", proc)
        first = {p for p, _ in loads(log.read_text())}
        serve_requests(base)
        assert {int(p) for p in REQUEST.findall(log.read_text())} <= first

        # apachectl graceful: the daemon processes finish their requests
        # and are replaced; each new one loads the world (one provider).
        proc.send_signal(signal.SIGUSR1)
        wait_for(lambda: len(loads(log.read_text())) == 2 * DAEMONS, "reload", log)
        again = loads(log.read_text())[DAEMONS:]
        assert {n for _, n in again} == {1}
        assert not {p for p, _ in again} & first
        assert offers(base) == 1
    finally:
        processes.stop_group(proc)
