"""A backup restored under a running ``berth serve`` (docs/install.md,
"Backup and restore"), on SQLite, PostgreSQL and MariaDB, each with the
tools the docs name: state A, a backup, more writes (state B, positions
past A's), then A restored while a server with two workers runs.

What Berth does then: the change feed answers every position of B (past
the restored database's) with its 410 and the "ahead" message, through
``GET /berth/changes``, the watch and ``berth watch``. The workers'
candidate caches follow the change sequence, which the restore set
back, and a cache does not take a sequence behind it for another
history: each keeps serving B's allocation candidates. ``berth db
mark-restored`` moves the sequence past B's numbers: every worker then
reloads its world and serves A without a restart, and every position
handed out before is older than the history kept (410, list again),
even once new writes have numbered past it.

Workers are told apart by holding one busy with a request whose headers
have not all come (a sync worker serves one connection at a time), so
that the next connection goes to the other (:func:`each_worker`).
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
import uuid as uuidlib
from typing import Any

import pytest
import sqlalchemy as sa

from berth.db import changes
from support.databases import Backend
from support.processes import (
    BERTH,
    Server,
    stop_group,
    two_free_ports,
    wait_ready,
)

pytestmark = pytest.mark.stress

VERSION = "placement 1.39"
CANDIDATES = "/allocation_candidates?resources=VCPU:1"


def start(backup_backend: Backend, port: int) -> Server:
    """``berth serve`` with two workers on ``port``, its watch on the
    next port."""
    conf = backup_backend.tmp / "placement.conf"
    log = backup_backend.tmp / "serve.log"
    with log.open("ab") as sink:
        proc = subprocess.Popen(
            [*BERTH, "serve", "--port", str(port), "--workers", "2", "--config-file", str(conf)],
            stderr=sink,
            stdout=subprocess.DEVNULL,
            env={**os.environ, "OS_PLACEMENT_CONFIG_DIR": ""},
            start_new_session=True,
        )
    wait_ready("http://127.0.0.1:%d/" % port, proc)
    server = Server(proc, port, log)
    server.wait_log(r"serving the change feed's watch")
    return server


def api(port: int, method: str, path: str, body: Any = None) -> tuple[int, Any, dict[str, str]]:
    """Status, decoded body and headers of one API request."""
    req = urllib.request.Request(
        "http://127.0.0.1:%d%s" % (port, path),
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={
            "x-auth-token": "admin",
            "content-type": "application/json",
            "openstack-api-version": VERSION,
        },
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            data = resp.read()
            return resp.status, json.loads(data) if data else None, dict(resp.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read()), dict(exc.headers)


def provider(port: int, name: str) -> str:
    """A new provider with 8 VCPU; its uuid."""
    uuid = str(uuidlib.uuid4())
    assert api(port, "POST", "/resource_providers", {"name": name, "uuid": uuid})[0] == 200
    assert (
        api(
            port,
            "PUT",
            "/resource_providers/%s/inventories" % uuid,
            {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}},
        )[0]
        == 200
    )
    return uuid


def position(backup_backend: Backend) -> str:
    """The database's newest position, read from it (a read's header may
    lag by half a second)."""
    engine = sa.create_engine(backup_backend.url)
    try:
        with engine.connect() as conn:
            return str(changes.current(conn))
    finally:
        engine.dispose()


def _request(path: str) -> bytes:
    return (
        "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nx-auth-token: admin\r\n"
        "openstack-api-version: %s\r\n" % (path, VERSION)
    ).encode()


def _read(sock: socket.socket) -> Any:
    reply = b""
    while chunk := sock.recv(65536):
        reply += chunk
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200"), reply[:500]
    return json.loads(body)


def each_worker(port: int, path: str) -> list[Any]:
    """``GET path``'s answer from each of the two workers: one worker
    holds a connection whose request has not ended while the other
    answers the same request; then the first gets the rest of its own."""
    with socket.create_connection(("127.0.0.1", port), timeout=30) as held:
        held.sendall(_request(path))  # no blank line yet: a worker waits
        time.sleep(0.5)
        with socket.create_connection(("127.0.0.1", port), timeout=30) as other:
            other.sendall(_request(path) + b"\r\n")
            second = _read(other)
        held.sendall(b"\r\n")
        return [_read(held), second]


def providers_of(answer: Any) -> set[str]:
    if "resource_providers" in answer:
        return {rp["uuid"] for rp in answer["resource_providers"]}
    return set(answer["provider_summaries"])


def test_a_restored_backup_under_a_running_server(backup_backend: Backend) -> None:
    port = two_free_ports()
    (backup_backend.tmp / "placement.conf").write_text(
        "[api]\nauth_strategy = noauth2\n"
        "[placement_database]\nconnection = %s\n"
        "[berth]\nwatch_listen = 127.0.0.1:%d\n" % (backup_backend.url, port + 1)
    )
    subprocess.run(
        [*BERTH, "db", "sync", "--config-file", str(backup_backend.tmp / "placement.conf")],
        check=True,
        capture_output=True,
        timeout=120,
        env={**os.environ, "OS_PLACEMENT_CONFIG_DIR": ""},
    )
    server = start(backup_backend, port)
    try:
        state_a = {provider(port, "a%d" % i) for i in range(2)}
        at_a = position(backup_backend)
        backup_backend.backup()
        state_b = {provider(port, "b%d" % i) for i in range(2)}
        at_b = position(backup_backend)
        for path in ("/resource_providers", CANDIDATES):
            assert all(
                providers_of(answer) == state_a | state_b for answer in each_worker(port, path)
            )

        backup_backend.restore()

        # The feed: B's position is ahead of the restored database.
        status, body, _ = api(port, "GET", "/berth/changes?after=" + at_b)
        assert status == 410, body
        error = body["errors"][0]
        assert error["code"] == "berth.changes.gone"
        detail = "Position %s is ahead of this database (at %s): was it restored from a backup?" % (
            at_b,
            at_a,
        )
        assert detail in error["detail"], error
        watch = urllib.request.Request(
            "http://127.0.0.1:%d/berth/changes/watch?after=%s" % (port + 1, at_b),
            headers={"x-auth-token": "admin"},
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(watch, timeout=30)
        assert refused.value.code == 410
        assert detail in json.loads(refused.value.read())["errors"][0]["detail"]
        cli = subprocess.run(
            [
                *BERTH,
                "watch",
                "--once",
                "--after",
                at_b,
                "--config-file",
                str(backup_backend.tmp / "placement.conf"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "OS_PLACEMENT_CONFIG_DIR": ""},
        )
        assert cli.returncode == 1 and cli.stdout == ""
        assert cli.stderr.startswith("berth: error: " + detail), cli.stderr
        assert len(cli.stderr.strip().splitlines()) == 1
        # From A's position the feed reads on: nothing after it.
        status, body, _ = api(port, "GET", "/berth/changes?after=" + at_a)
        assert (status, body["events"], body["position"]) == (200, [], at_a)

        # Listings read the database: every worker lists A.
        assert [providers_of(answer) for answer in each_worker(port, "/resource_providers")] == [
            state_a,
            state_a,
        ]
        # The candidate caches do not follow a sequence set back: each
        # worker still offers B's world.
        assert [providers_of(answer) for answer in each_worker(port, CANDIDATES)] == [
            state_a | state_b
        ] * 2

        # berth db mark-restored: the sequence moves past B's numbers.
        marked = subprocess.run(
            [
                *BERTH,
                "db",
                "mark-restored",
                "--config-file",
                str(backup_backend.tmp / "placement.conf"),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "OS_PLACEMENT_CONFIG_DIR": ""},
        )
        assert marked.returncode == 0, marked.stderr
        slot, seq = (int(x) for x in at_a.split(":"))
        at_mark = "%d:%d" % (slot, seq + 2**32)
        assert "moved on to %s:" % at_mark in marked.stdout
        assert position(backup_backend) == at_mark
        # Every worker reloads its world, without a restart.
        for path in ("/resource_providers", CANDIDATES):
            assert [providers_of(answer) for answer in each_worker(port, path)] == [
                state_a,
                state_a,
            ]
        # New writes number on from there; B's position and A's are
        # older than the history kept: list again.
        state_c = {provider(port, "c")}
        assert position(backup_backend) == "%d:%d" % (slot, seq + 2**32 + 2)
        for path in ("/resource_providers", CANDIDATES):
            assert [providers_of(answer) for answer in each_worker(port, path)] == [
                state_a | state_c
            ] * 2
        for old in (at_a, at_b):
            status, body, _ = api(port, "GET", "/berth/changes?after=" + old)
            assert status == 410, body
            detail = body["errors"][0]["detail"]
            assert "no longer holds the events after position %s" % old in detail, detail
            assert detail.count("oldest position") == 1
        status, body, _ = api(port, "GET", "/berth/changes?after=" + at_mark)
        assert status == 200 and len(body["events"]) == 2, body
    finally:
        stop_group(server.proc)  # type: ignore[arg-type]
