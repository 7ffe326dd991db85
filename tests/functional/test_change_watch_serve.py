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
from pathlib import Path
from typing import Any

import pytest

from support.processes import BERTH, Server, stop_group, two_free_ports
from support.watch_serve import PATTERN, api, config, new_provider, position, start


def feed_pids(server: Server) -> list[int]:
    return [int(pid) for pid in re.findall(PATTERN, server.log_text())]


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


def test_a_watcher_resumes_across_the_feed_process_being_killed(served_watch: Server) -> None:
    stream = Watch(served_watch, position(served_watch))
    first = [new_provider(served_watch) for _ in range(2)]
    got = events(stream, 2)
    assert [e["subject"] for e in got] == first
    pid = feed_pids(served_watch)[-1]
    # Named so that ps tells it from the API's workers.
    assert Path("/proc/%d/comm" % pid).read_text() == "berth-feed\n"
    os.kill(pid, signal.SIGKILL)
    assert stream.readline() == b""  # the stream ends with its process
    stream.close()
    missed = [new_provider(served_watch) for _ in range(3)]
    deadline = time.monotonic() + 30
    while feed_pids(served_watch)[-1] == pid:
        assert time.monotonic() < deadline, served_watch.log_text()
        time.sleep(0.1)
    assert "the change feed's process (pid %d) exited" % pid in served_watch.log_text()
    again = Watch(served_watch, got[-1]["after"])
    later = new_provider(served_watch)
    assert [e["subject"] for e in events(again, 4)] == missed + [later]
    again.close()


def test_watchers_hold_no_api_worker(served_watch: Server) -> None:
    # One sync API worker: a watcher held by it would leave none.
    streams = [Watch(served_watch, position(served_watch)) for _ in range(5)]
    made = new_provider(served_watch)
    assert api(served_watch, "GET", "/resource_providers/" + made)[0] == 200
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
