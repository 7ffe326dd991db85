"""``berth serve`` as a real process: the HTTP edge (what gunicorn reads
and what it refuses) and the life cycle (start-up validation, "serving"
once bound, SIGTERM with a request in flight).

Covers ``berth.serve.edge`` and ``berth.serve.master``."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest

from berth.serve import master
from support.processes import BERTH, Server, start_berth, stop_berth

UUIDS = [str(uuid.UUID(int=i + 1)) for i in range(400)]


def get(path: str, headers: list[tuple[str, str]] = ()) -> bytes:  # type: ignore[assignment]
    lines = [
        "GET %s HTTP/1.1" % path,
        "Host: 127.0.0.1",
        "x-auth-token: admin",
        "openstack-api-version: placement 1.39",
    ]
    lines += ["%s: %s" % h for h in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def assert_placement_error(
    status_line: str, headers: dict[str, str], body: bytes, status: int
) -> str:
    assert status_line.split(" ")[1] == str(status), status_line
    assert headers["content-type"] == "application/json"
    error = json.loads(body)["errors"][0]
    assert error["status"] == status
    rid = headers["x-openstack-request-id"]
    assert rid.startswith("req-") and error["request_id"] == rid
    return rid


def _member_of_url(length: int) -> str:
    """A provider listing filtered by as many aggregates as fit in a URL
    of exactly ``length`` characters."""
    base = "/resource_providers?member_of=in:"
    ids = UUIDS[: (length - len(base)) // 37 + 1]
    url = base + ",".join(ids)
    while len(url) > length:
        ids.pop()
        url = base + ",".join(ids)
    return url + "&name=" + "x" * (length - len(url) - len("&name="))


def test_an_8_kib_url_is_served(serve_server: Server) -> None:
    url = _member_of_url(8192)
    assert len(url) == 8192 and url.count(",") > 200
    status, _, body = serve_server.raw(get(url))
    assert status.startswith("HTTP/1.1 200"), (status, body[:300])
    assert json.loads(body) == {"resource_providers": []}


def test_a_longer_url_is_a_json_414(serve_server: Server) -> None:
    rid = assert_placement_error(*serve_server.raw(get(_member_of_url(8193))), 414)
    rid2 = assert_placement_error(*serve_server.raw(get("/?" + "a" * 70000)), 414)
    log = serve_server.wait_log(r'"GET /resource_providers\?member_of=.*status: 414')
    # Refused by gunicorn itself (a request line beyond what it reads), it
    # is still logged by the same request-log line.
    assert re.search(r'"- -" status: 414 len: \d+', log), log
    assert rid != rid2


def test_upstream_header_sizes_are_served(serve_server: Server) -> None:
    # 100 header lines, all but get()'s three of 8,190 bytes each.
    filler = [("x-f%02d" % i, "v" * (8190 - len("x-f00: "))) for i in range(97)]
    status, _, body = serve_server.raw(get("/", filler))
    assert status.startswith("HTTP/1.1 200"), (status, body[:300])


@pytest.mark.parametrize(
    "headers",
    [
        [("x-long", "v" * (8191 - len("x-long: ")))],
        [("x-f%03d" % i, "v") for i in range(98)],
    ],
    ids=["line-of-8191-bytes", "101-headers"],
)
def test_beyond_the_header_limits_is_a_json_431(
    serve_server: Server, headers: list[tuple[str, str]]
) -> None:
    assert_placement_error(*serve_server.raw(get("/", headers)), 431)
    assert re.search(r'"- -" status: 431', serve_server.log_text())


def test_an_unparsable_request_is_a_json_400(serve_server: Server) -> None:
    status, headers, body = serve_server.raw(b"NOT A REQUEST\r\n\r\n")
    assert_placement_error(status, headers, body, 400)
    assert b"could not be parsed" in body


def test_refusals_map_only_the_clients_faults() -> None:
    from gunicorn.http import errors as http_errors

    from berth.serve.edge import refusal

    assert refusal(http_errors.LimitRequestLine(9000, 8209)).status == 414
    assert refusal(http_errors.LimitRequestHeaders("x")).status == 431
    bad = refusal(http_errors.InvalidRequestLine("GARBAGE"))
    assert bad is not None and bad.status == 400 and "GARBAGE" in bad.detail
    # The application's own bad response header stays a 500 from gunicorn
    # (an error gunicorn 27 brought).
    if hasattr(http_errors, "InvalidResponseHeader"):
        assert refusal(http_errors.InvalidResponseHeader("x")) is None
    assert refusal(RuntimeError("boom")) is None


def test_bad_configuration_is_one_line_before_any_worker(tmp_path: Path) -> None:
    conf = tmp_path / "placement.conf"
    conf.write_text("[api]\nauth_strategy = bogus\n")
    result = subprocess.run(
        [*BERTH, "serve", "--config-file", str(conf)], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "berth: error: bad configuration: [api] auth_strategy: Valid values "
        "are [keystone, noauth2], but found 'bogus'"
    ]


@pytest.mark.parametrize("workers", ["0", "-2", "many"])
def test_workers_must_be_at_least_one(workers: str) -> None:
    result = subprocess.run(
        [*BERTH, "serve", "--workers", workers], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 2
    assert "argument --workers:" in result.stderr
    assert "Traceback" not in result.stderr


def test_serving_is_logged_once_bound_and_sigterm_finishes_in_flight(tmp_path: Path) -> None:
    srv = start_berth(tmp_path, "--workers", "1")
    try:
        log = srv.wait_log("serving Placement API")
        assert log.count("serving Placement API") == 1
        assert "serving Placement API on http://127.0.0.1:%d with 1 worker(s)" % srv.port in log
        # Logged once bound: the first connection right after the line
        # is answered (no retry).
        assert srv.raw(get("/"))[0].startswith("HTTP/1.1 200")
        # A request in flight: the worker has read its headers (it sent
        # "100 Continue") and waits for the body when SIGTERM arrives.
        body = json.dumps({"name": "CUSTOM_IN_FLIGHT"}).encode()
        conn = socket.create_connection(("127.0.0.1", srv.port), timeout=60)
        conn.sendall(
            (
                "POST /resource_classes HTTP/1.1\r\nHost: x\r\n"
                "x-auth-token: admin\r\ncontent-type: application/json\r\n"
                "openstack-api-version: placement 1.7\r\n"
                "Expect: 100-continue\r\ncontent-length: %d\r\n\r\n" % len(body)
            ).encode()
        )
        assert conn.recv(100).startswith(b"HTTP/1.1 100 Continue")
        srv.proc.send_signal(signal.SIGTERM)
        srv.wait_log("SIGTERM received")
        conn.sendall(body)
        reply = b""
        while chunk := conn.recv(65536):
            reply += chunk
        conn.close()
        assert reply.startswith(b"HTTP/1.1 201"), reply
        assert srv.proc.wait(timeout=60) == 0
        assert re.search(r"berth\.server( \[[^]]*\])? stopped", srv.log_text())
        # New connections are no longer accepted.
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    finally:
        stop_berth(srv)


#: ``berth serve`` whose second worker takes a minute to boot (held in
#: gunicorn's post_fork hook, before it sets its own signal handlers).
SLOW_SECOND_WORKER = """
import sys, time
from berth.cli import main
from berth.serve import master
booted = master._post_fork
def held(server, worker):
    if worker.age > 1:
        time.sleep(60)
    booted(server, worker)
master._post_fork = held
sys.exit(main(sys.argv[1:]))
"""


def test_sigterm_while_a_worker_boots_stops_at_once(tmp_path: Path) -> None:
    """A worker still booting when the master is told to stop had
    inherited the master's handlers, which only queue a signal: it never
    saw its SIGTERM, and the master waited GRACEFUL_TIMEOUT seconds
    before killing it (CI saw a 30 s stop). It now ends at once."""
    srv = start_berth(tmp_path, "--workers", "2", argv=[sys.executable, "-c", SLOW_SECOND_WORKER])
    try:
        srv.wait_log(r"(?s)Booting worker.*Booting worker")
        assert srv.raw(get("/"))[0].startswith("HTTP/1.1 200")
        srv.proc.send_signal(signal.SIGTERM)
        # Well before the graceful timeout a worker that ignored it would take.
        assert srv.proc.wait(timeout=master.GRACEFUL_TIMEOUT / 3) == 0
        log = srv.log_text()
        assert "SIGKILL" not in log and "stopped" in log
    finally:
        stop_berth(srv)


def test_the_control_socket_is_turned_off_only_where_gunicorn_has_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """gunicorn 25.1 added the setting; before it, setting it would be an
    error, so it is set only when gunicorn's registry lists it."""
    from berth import conf as berth_conf

    conf = berth_conf.load([], default_config_files=[])
    has_it = any(setting.name == "control_socket_disable" for setting in master.KNOWN_SETTINGS)
    options = master.gunicorn_options(conf, "127.0.0.1:8778", 1)
    assert options.get("control_socket_disable") is (True if has_it else None)
    monkeypatch.setattr(
        master,
        "KNOWN_SETTINGS",
        [
            setting
            for setting in master.KNOWN_SETTINGS
            if not setting.name.startswith("control_socket")
        ],
    )
    assert "control_socket_disable" not in master.gunicorn_options(conf, "127.0.0.1:8778", 1)


@pytest.mark.parametrize("home", ["empty", "missing"])
def test_serving_writes_nothing_to_home_and_opens_no_control_socket(
    tmp_path: Path, home: str
) -> None:
    """gunicorn 25.1 and later open a control socket under $HOME unless
    told not to (berth.serve.master), stevedore caches entry points there
    (berth.serve.no_entry_point_cache); nothing may land there when a
    configuration file says where everything goes, nor $HOME be made."""
    folder = tmp_path / "home"
    if home == "empty":
        folder.mkdir()
    conf = tmp_path / "placement.conf"
    conf.write_text(
        "[api]\nauth_strategy = noauth2\n[placement_database]\n"
        "connection = sqlite:///%s\nsync_on_startup = true\n" % (tmp_path / "p.sqlite")
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k
        not in (
            "XDG_RUNTIME_DIR",
            "XDG_CACHE_HOME",
            "XDG_DATA_HOME",
            "BERTH_DATA_DIR",
            "PROMETHEUS_MULTIPROC_DIR",
        )
    }
    env.update(HOME=str(folder), OS_PLACEMENT_CONFIG_DIR="")
    srv = start_berth(tmp_path, "--config-file", str(conf), "--workers", "1", env=env)
    try:
        srv.wait_log("serving Placement API")
        assert srv.raw(get("/resource_providers"))[0].startswith("HTTP/1.1 200")
    finally:
        assert stop_berth(srv) == 0, srv.log_text()
    assert "Control socket" not in srv.log_text()
    if home == "empty":
        assert list(folder.iterdir()) == []
    else:
        assert not folder.exists()
    assert not (tmp_path / "gunicorn.ctl").exists()


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))


def _refuse_over_tcp(close: Callable[[socket.socket], None]) -> bytes:
    """What a client reads that sends 256 KiB of request and is answered
    after the first 1 KiB, the server then calling ``close`` and closing."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        conn.recv(1024)
        conn.sendall(b"HTTP/1.1 414 URI Too Long\r\nContent-Length: 0\r\n\r\n")
        close(conn)
        conn.close()

    thread = threading.Thread(target=serve)
    thread.start()
    client = socket.create_connection(("127.0.0.1", port))
    try:
        try:
            client.sendall(b"GET /" + b"a" * 256 * 1024)
        except OSError:
            pass
        client.settimeout(5)
        got = b""
        try:
            while chunk := client.recv(4096):
                got += chunk
        except ConnectionResetError:
            got += b"<reset>"
        return got
    finally:
        client.close()
        thread.join()
        listener.close()


def test_a_refusal_lingers_so_the_client_reads_it() -> None:
    """Before gunicorn 26 nothing drained a refused request: closing with
    unread bytes resets the connection, and the client loses the answer."""
    from berth.serve.edge import _linger

    assert _refuse_over_tcp(_linger).startswith(b"HTTP/1.1 414")
    assert b"<reset>" in _refuse_over_tcp(lambda conn: None)
