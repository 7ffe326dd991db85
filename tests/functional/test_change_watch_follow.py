"""``berth watch --url`` follows the watch stream through a restart of
``berth serve`` (reconnecting with backoff and resuming from the last
frame's position: every event once, none missed), gives up after
``--retry-for`` with one line naming the URL, and stops at a 410.

Covers ``berth.cli.watch`` (``_stream``, ``_follow``, ``_print_writes``)."""

from __future__ import annotations

import argparse
import json
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any

from support.processes import BERTH, free_port, run, stop_group
from support.watch_serve import PATTERN, new_provider, position, start


def _lines(stream: IO[str]) -> queue.Queue[str]:
    """The lines of ``stream`` as a reader thread gets them."""
    got: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in stream:
            got.put(line)

    threading.Thread(target=read, daemon=True).start()
    return got


def _events(lines: queue.Queue[str], count: int) -> list[str]:
    """The subjects of the next ``count`` events printed (30 s at most)."""
    return [json.loads(lines.get(timeout=30))["subject"] for _ in range(count)]


def test_berth_watch_follows_a_restarted_server(tmp_path: Path) -> None:
    srv = start(tmp_path)
    watcher = None
    try:
        srv.wait_log(PATTERN)
        url = "http://127.0.0.1:%d" % (srv.port + 1)
        watcher = subprocess.Popen(
            [*BERTH, "watch", "--url", url, "--after", position(srv), "--retry-for", "120"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        out = _lines(watcher.stdout)  # type: ignore[arg-type]
        first = [new_provider(srv) for _ in range(3)]
        assert _events(out, 3) == first
        stop_group(srv.proc)  # type: ignore[arg-type]
        time.sleep(1.5)  # a reconnection or two fails meanwhile
        srv = start(tmp_path, port=srv.port)  # same port, same database
        srv.wait_log(PATTERN)
        second = [new_provider(srv) for _ in range(3)]
        assert _events(out, 3) == second
        time.sleep(1)
        assert out.empty()  # no event twice
        watcher.terminate()
        err = watcher.communicate(timeout=30)[1].splitlines()
    finally:
        if watcher is not None and watcher.poll() is None:
            watcher.kill()
            watcher.wait()
        stop_group(srv.proc)  # type: ignore[arg-type]
    watch = url + "/berth/changes/watch"
    lost = [
        n
        for n, line in enumerate(err)
        if line.startswith("berth watch: connection to %s lost" % watch)
    ]
    assert lost and "reconnecting from 1:" in err[lost[0]], err
    assert "(attempt 2)" in "\n".join(err), err
    assert err[lost[-1] + 1].startswith(
        "berth watch: reconnected to %s; reading on from 1:" % watch
    ), err


def test_berth_watch_gives_up_with_the_url() -> None:
    url = "http://127.0.0.1:%d" % free_port()  # nothing listens
    result = run("watch", "--url", url, "--retry-for", "0")
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith(
        "berth watch: giving up on %s/berth/changes/watch after 1 attempt " % url
    ), line
    assert "Connection refused" in line and result.stdout == ""
    began = time.monotonic()
    result = run("watch", "--url", url, "--retry-for", "1.5")
    assert result.returncode == 1 and time.monotonic() - began >= 1.5
    lines = result.stderr.splitlines()
    assert len(lines) >= 3 and "(attempt 2)" in lines[1], lines
    assert lines[-1].startswith("berth watch: giving up on %s" % url)


def test_berth_watch_stops_at_a_gone_position(tmp_path: Path) -> None:
    srv = start(tmp_path)
    try:
        srv.wait_log(PATTERN)
        result = run("watch", "--url", "http://127.0.0.1:%d" % (srv.port + 1), "--after", "1:999")
    finally:
        stop_group(srv.proc)  # type: ignore[arg-type]
    assert result.returncode == 1
    [line] = result.stderr.splitlines()
    assert line.startswith("berth: error: Position 1:999 is ahead of this database"), line
    assert "List again" in line


def test_a_write_cut_off_is_printed_once(capsys: Any) -> None:
    """A stream that ends inside a write prints none of it and stays at
    the position before it: resumed, the write comes whole, once."""
    from berth.cli.watch import _print_writes

    def event(n: int, after: str) -> str:
        return json.dumps({"kind": "traits.set", "index": n, "position": "1:5", "after": after})

    once = argparse.Namespace(once=False)
    params = {"after": "1:4"}
    assert not _print_writes(once, iter([event(0, "1:4")]), params)
    assert (capsys.readouterr().out, params["after"]) == ("", "1:4")
    resumed = [event(0, "1:4"), event(1, "1:5"), '{"after": "1:6"}']
    assert not _print_writes(once, iter(resumed), params)
    printed = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert [e["index"] for e in printed] == [0, 1]
    assert params["after"] == "1:6"
