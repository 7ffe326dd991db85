"""The watch form under ``berth serve`` (SQLite, embedded): the feed's
own process starts with the API, is restarted when it dies, stops with
the master, and holds no API worker; a watcher resumes across its death
without a gap or a duplicate.

Covers ``berth.serve.master.FeedProcess`` and ``berth.serve.watch``."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.request
import uuid as uuidlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from support.processes import BERTH, Server, stop_group, two_free_ports

PATTERN = r"serving the change feed's watch on \S+ \(pid (\d+)\)"


def config(tmp_path: Path, watch: str | None) -> Path:
    """A placement.conf: noauth2, SQLite in ``tmp_path``, and ``[berth]
    watch_listen = watch`` unless None."""
    conf = tmp_path / "placement.conf"
    conf.write_text(
        "[api]\nauth_strategy = noauth2\n"
        "[placement_database]\nconnection = sqlite:///%s\n%s"
        % (tmp_path / "db.sqlite", "" if watch is None else "[berth]\nwatch_listen = %s\n" % watch)
    )
    return conf


def start(tmp_path: Path, watch: bool = True, port: int | None = None) -> Server:
    """``berth serve`` with one worker on ``port`` (default: a free one),
    and its watch on the next port (unless not ``watch``)."""
    port = port or two_free_ports()
    conf = config(tmp_path, "127.0.0.1:%d" % (port + 1) if watch else None)
    log = tmp_path / "serve.log"
    env = {**os.environ, "OS_PLACEMENT_CONFIG_DIR": ""}
    subprocess.run(
        [*BERTH, "db", "sync", "--config-file", str(conf)],
        check=True,
        capture_output=True,
        env=env,
        timeout=120,
    )
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [*BERTH, "serve", "--port", str(port), "--workers", "1", "--config-file", str(conf)],
            stderr=sink,
            stdout=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    return Server(proc, port, log)


def feed_pids(server: Server) -> list[int]:
    return [int(pid) for pid in re.findall(PATTERN, server.log_text())]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    srv = start(tmp_path_factory.mktemp("watch-serve"))
    srv.wait_log("serving Placement API")
    srv.wait_log(PATTERN)
    yield srv
    stop_group(srv.proc)  # type: ignore[arg-type]


def api(server: Server, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """The status and headers of an API request (the body read)."""
    req = urllib.request.Request(
        "http://127.0.0.1:%d%s" % (server.port, path),
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={
            "x-auth-token": "admin",
            "content-type": "application/json",
            "openstack-api-version": "placement 1.39",
        },
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        resp.read()
        return resp.status, resp.headers


def new_provider(server: Server) -> str:
    uuid = str(uuidlib.uuid4())
    api(server, "POST", "/resource_providers", {"name": uuid, "uuid": uuid})
    return uuid


def position(server: Server) -> str:
    return str(api(server, "GET", "/resource_classes")[1]["berth-position"])


class Watch:
    """One watch on the feed's port; ``close`` ends it."""

    def __init__(self, server: Server, after: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", server.port + 1, timeout=30)
        self.conn.request(
            "GET", "/berth/changes/watch?after=" + after, headers={"x-auth-token": "admin"}
        )
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200

    def readline(self) -> bytes:
        return self.resp.readline()

    def close(self) -> None:
        self.resp.close()
        self.conn.close()


def events(resp: Watch, count: int) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    while len(found) < count:
        line = resp.readline()
        assert line, "the stream ended"
        frame = json.loads(line)
        if "kind" in frame:
            found.append(frame)
    return found


def test_a_watcher_resumes_across_the_feed_process_being_killed(server: Server) -> None:
    stream = Watch(server, position(server))
    first = [new_provider(server) for _ in range(2)]
    got = events(stream, 2)
    assert [e["subject"] for e in got] == first
    pid = feed_pids(server)[-1]
    # Named so that ps tells it from the API's workers.
    assert Path("/proc/%d/comm" % pid).read_text() == "berth-feed\n"
    os.kill(pid, signal.SIGKILL)
    assert stream.readline() == b""  # the stream ends with its process
    stream.close()
    missed = [new_provider(server) for _ in range(3)]
    deadline = time.monotonic() + 30
    while feed_pids(server)[-1] == pid:
        assert time.monotonic() < deadline, server.log_text()
        time.sleep(0.1)
    assert "the change feed's process (pid %d) exited" % pid in server.log_text()
    again = Watch(server, got[-1]["after"])
    later = new_provider(server)
    assert [e["subject"] for e in events(again, 4)] == missed + [later]
    again.close()


def test_watchers_hold_no_api_worker(server: Server) -> None:
    # One sync API worker: a watcher held by it would leave none.
    streams = [Watch(server, position(server)) for _ in range(5)]
    made = new_provider(server)
    assert api(server, "GET", "/resource_providers/" + made)[0] == 200
    for stream in streams:
        assert events(stream, 1)[0]["subject"] == made
        stream.close()


def test_the_feed_process_stops_with_the_master(tmp_path: Path) -> None:
    srv = start(tmp_path)
    try:
        srv.wait_log(PATTERN)
        pid = feed_pids(srv)[0]
        srv.proc.send_signal(signal.SIGTERM)  # the master only
        assert srv.proc.wait(60) == 0
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    finally:
        stop_group(srv.proc)  # type: ignore[arg-type]


def test_the_feed_process_ends_when_the_master_is_killed(tmp_path: Path) -> None:
    srv = start(tmp_path)
    try:
        srv.wait_log(PATTERN)
        pid = feed_pids(srv)[0]
        srv.proc.kill()  # no word to anyone: the feed notices by itself
        srv.proc.wait(30)
        deadline = time.monotonic() + 30
        while os.path.exists("/proc/%d" % pid) and _state(pid) != "Z":
            assert time.monotonic() < deadline, "the feed outlived its master"
            time.sleep(0.1)
    finally:
        stop_group(srv.proc)  # type: ignore[arg-type]


def _state(pid: int) -> str:
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rpartition(")")[2].split()[0]
    except OSError:
        return "gone"


def test_a_taken_watch_port(tmp_path: Path) -> None:
    """A ``watch_listen`` whose port is taken stops ``berth serve`` with
    one line; with none set, no watch is served and no port but the API's
    is taken (the next port stays free for another server)."""
    port = two_free_ports()
    env = {**os.environ, "OS_PLACEMENT_CONFIG_DIR": ""}
    conf = config(tmp_path, "127.0.0.1:%d" % (port + 1))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", port + 1))
        taken.listen(1)
        result = subprocess.run(
            [*BERTH, "serve", "--port", str(port), "--config-file", str(conf)],
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
        )
    assert result.returncode == 1
    assert (
        result.stderr.strip()
        .splitlines()[-1]
        .startswith(
            "berth: error: cannot listen on 127.0.0.1:%d for the change feed: " % (port + 1)
        )
    )
    assert "Traceback" not in result.stderr
    server = start(tmp_path, watch=False)
    try:
        text = server.wait_log("serving Placement API")
        assert position(server)
        assert not re.search(PATTERN, text)
        with socket.socket() as probe:  # the next port is still free
            probe.bind(("127.0.0.1", server.port + 1))
    finally:
        stop_group(server.proc)  # type: ignore[arg-type]
