"""``berth serve`` as operators deploy it: under systemd (``Type=notify``),
over TLS, on a unix socket, with the worker timeout from configuration.

Covers ``berth.serve.systemd``, the address and TLS parts of
``berth.serve.master`` and ``berth.conf.check.check_tls``."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from berth import conf as berth_conf
from berth.conf import check
from berth.serve import master, systemd
from support import processes
from support.processes import BERTH, Server, free_port


def serve(tmp_path: Path, conf_text: str, *extra: str, env: dict[str, str] | None = None) -> Server:
    """``berth serve`` on a free port with a configuration file of a
    noauth2 SQLite database and ``conf_text``; stderr in serve.log."""
    conf = tmp_path / "placement.conf"
    conf.write_text(
        "[api]\nauth_strategy = noauth2\n[placement_database]\n"
        "connection = sqlite:///%s\nsync_on_startup = true\n%s" % (tmp_path / "p.sqlite", conf_text)
    )
    port = free_port()
    address = [] if "--unix-socket" in extra else ["--port", str(port)]
    return processes.serve(
        tmp_path,
        port,
        "--config-file",
        str(conf),
        "--workers",
        "2",
        *address,
        *extra,
        env={**os.environ, "OS_PLACEMENT_CONFIG_DIR": "", **(env or {})},
    )


def finish(server: Server) -> int:
    if server.proc.poll() is None:
        server.proc.send_signal(signal.SIGTERM)
    return server.proc.wait(timeout=60)


# systemd ------------------------------------------------------------------


def receive(sock: socket.socket, server: Server, timeout: float = 60) -> dict[str, str]:
    """The next notification, as a dict of its fields."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sock.settimeout(0.2)
        try:
            data = sock.recv(4096).decode()
        except TimeoutError:
            if server.proc.poll() is not None:
                raise AssertionError("server exited:\n" + server.log_text()) from None
            continue
        return dict(line.partition("=")[::2] for line in data.splitlines())
    raise AssertionError("no notification:\n" + server.log_text())


def test_systemd_hears_ready_reloading_and_stopping(
    tmp_path: Path, notify_socket: tuple[socket.socket, str]
) -> None:
    sock, name = notify_socket
    srv = serve(tmp_path, "", env={"NOTIFY_SOCKET": name})
    try:
        ready = receive(sock, srv)
        # READY only once the workers answer: gunicorn's own READY (sent
        # when its sockets are bound, before any worker) never came.
        assert ready["READY"] == "1", ready
        assert "with 2 worker(s)" in ready["STATUS"]
        assert srv.raw(_get("/"))[0].startswith("HTTP/1.1 200")
        srv.proc.send_signal(signal.SIGHUP)
        reloading = receive(sock, srv)
        assert reloading["RELOADING"] == "1"
        assert (
            0
            < int(reloading["MONOTONIC_USEC"])
            <= time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000
        )
        assert receive(sock, srv)["READY"] == "1"
        assert srv.raw(_get("/"))[0].startswith("HTTP/1.1 200")
        srv.proc.send_signal(signal.SIGTERM)
        assert receive(sock, srv)["STOPPING"] == "1"
        assert srv.proc.wait(timeout=60) == 0, srv.log_text()
        sock.settimeout(0.5)
        with pytest.raises(TimeoutError):  # nothing more, no double READY
            sock.recv(4096)
    finally:
        finish(srv)


def test_no_notify_socket_no_pipe_and_nothing_sent() -> None:
    notifier = systemd.Notifier.from_environ({})
    assert notifier.address is None and notifier.pending is False
    notifier.booted(None)
    notifier.check([1], 1)
    notifier.reloading()
    notifier.stopping()  # nothing to send to, and nothing fails


def test_the_variable_is_taken_from_the_environment() -> None:
    environ = {"NOTIFY_SOCKET": "/run/x", "OTHER": "1"}
    assert systemd.Notifier.from_environ(environ).address == "/run/x"
    assert environ == {"OTHER": "1"}
    assert systemd.socket_address("@name") == "\0name"
    assert systemd.socket_address("/run/x") == "/run/x"


def test_ready_waits_for_every_worker_of_the_generation(
    notify_socket: tuple[socket.socket, str],
) -> None:
    sock, name = notify_socket
    sock.settimeout(0.2)
    notifier = systemd.Notifier(name)
    notifier.check([], 2)
    notifier._booted.add(11)
    notifier.check([11, 12], 2)  # one of two booted
    with pytest.raises(TimeoutError):
        sock.recv(100)
    os.write(notifier._pipe[1], b"12\n")
    notifier.check([11, 12], 2, "serving")
    assert sock.recv(100) == b"READY=1\nSTATUS=serving"
    notifier.check([11, 12], 2)  # once
    notifier.reloading()
    assert sock.recv(100).startswith(b"RELOADING=1\nMONOTONIC_USEC=")
    notifier.check([11, 12, 13, 14], 2)  # the old ones still running
    os.write(notifier._pipe[1], b"13\n14")  # a record cut in two
    notifier.check([13, 14], 2)
    with pytest.raises(TimeoutError):
        sock.recv(100)
    os.write(notifier._pipe[1], b"\n")
    notifier.check([13, 14], 2)
    assert sock.recv(100) == b"READY=1"
    notifier.stopping()
    notifier.stopping()
    assert sock.recv(100) == b"STOPPING=1\nSTATUS=stopping"
    with pytest.raises(TimeoutError):
        sock.recv(100)


def test_the_unit_file_is_a_notify_service() -> None:
    unit = (Path(__file__).parents[2] / "deploy" / "systemd" / "berth.service").read_text()
    lines = {
        line.partition("=")[0]: line.partition("=")[2]
        for line in unit.splitlines()
        if "=" in line and not line.startswith("#")
    }
    assert lines["Type"] == "notify" and lines["NotifyAccess"] == "main"
    assert lines["ExecStart"].endswith("berth serve --config-file /etc/placement/placement.conf")
    assert lines["ExecReload"] == "/bin/kill -HUP $MAINPID"
    assert int(lines["TimeoutStopSec"]) > master.GRACEFUL_TIMEOUT


# TLS ----------------------------------------------------------------------


def test_tls_serves_https_verified_against_the_certificate(
    tmp_path: Path, certificate: tuple[Path, Path]
) -> None:
    cert, key = certificate
    srv = serve(tmp_path, "[berth]\nssl_cert_file = %s\nssl_key_file = %s\n" % (cert, key))
    try:
        log = srv.wait_log("serving Placement API")
        assert "https://127.0.0.1:%d" % srv.port in log
        context = ssl.create_default_context(cafile=str(cert))
        with httpx.Client(verify=context) as client:
            r = client.get(
                "https://127.0.0.1:%d/resource_providers" % srv.port,
                headers={"x-auth-token": "admin"},
            )
        assert r.status_code == 200, r.text
        # No plain HTTP beside it.
        with pytest.raises(httpx.HTTPError):
            httpx.get("http://127.0.0.1:%d/" % srv.port, timeout=5)
    finally:
        assert finish(srv) == 0, srv.log_text()


def _tls_conf(tmp_path: Path, **values: str) -> berth_conf.cfg.ConfigOpts:
    path = tmp_path / "tls.conf"
    path.write_text(
        "[placement_database]\nconnection = sqlite://\n[berth]\n"
        + "".join("%s = %s\n" % kv for kv in values.items())
    )
    return berth_conf.load(["--config-file", str(path)])


def test_tls_half_configured_or_unreadable_is_refused(
    tmp_path: Path, certificate: tuple[Path, Path]
) -> None:
    cert, key = certificate
    assert check.check_tls(_tls_conf(tmp_path)) is False
    assert (
        check.check_tls(_tls_conf(tmp_path, ssl_cert_file=str(cert), ssl_key_file=str(key))) is True
    )
    cases = [
        ({"ssl_cert_file": str(cert)}, "[berth] ssl_cert_file is set without ssl_key_file"),
        ({"ssl_key_file": str(key)}, "[berth] ssl_key_file is set without ssl_cert_file"),
        ({"ssl_ca_file": str(cert)}, "[berth] ssl_ca_file is set without ssl_cert_file"),
        (
            {"ssl_cert_file": str(tmp_path / "none.pem"), "ssl_key_file": str(key)},
            "No such file or directory",
        ),
        ({"ssl_cert_file": str(key), "ssl_key_file": str(key)}, "cannot be used for TLS"),
        (
            {
                "ssl_cert_file": str(cert),
                "ssl_key_file": str(key),
                "ssl_ca_file": str(tmp_path / "none.pem"),
            },
            "[berth] ssl_ca_file %s: cannot be used for TLS: No such file"
            % (tmp_path / "none.pem"),
        ),
    ]
    for values, message in cases:
        with pytest.raises(check.ConfigProblem) as caught:
            check.check_tls(_tls_conf(tmp_path, **values))
        assert message in str(caught.value)
        assert "\n" not in str(caught.value)


def test_berth_serve_refuses_half_tls_in_one_line(
    tmp_path: Path, certificate: tuple[Path, Path]
) -> None:
    srv = serve(tmp_path, "[berth]\nssl_cert_file = %s\n" % certificate[0])
    assert srv.proc.wait(timeout=60) == 1
    assert srv.log_text().strip().splitlines() == [
        "berth: error: [berth] ssl_cert_file is set without ssl_key_file: "
        "TLS needs both (refusing to serve plain HTTP)"
    ]


def test_a_ca_file_requires_client_certificates(
    tmp_path: Path, certificate: tuple[Path, Path]
) -> None:
    cert, key = certificate
    conf = _tls_conf(
        tmp_path, ssl_cert_file=str(cert), ssl_key_file=str(key), ssl_ca_file=str(cert)
    )
    options = master.gunicorn_options(conf, "127.0.0.1:8778", 1)
    assert (options["certfile"], options["keyfile"], options["ca_certs"], options["cert_reqs"]) == (
        str(cert),
        str(key),
        str(cert),
        ssl.CERT_REQUIRED,
    )
    plain = master.gunicorn_options(_tls_conf(tmp_path), "127.0.0.1:8778", 1)
    assert not {"certfile", "keyfile", "ca_certs", "cert_reqs"} & set(plain)


# The unix socket and the worker timeout ------------------------------------


def test_a_unix_socket_serves_noauth2_to_its_group_only(tmp_path: Path, short_dir: Path) -> None:
    path = short_dir / "berth.sock"
    srv = serve(tmp_path, "", "--unix-socket", str(path))
    try:
        log = srv.wait_log("serving Placement API")
        assert "serving Placement API on unix:%s" % path in log
        assert oct(path.stat().st_mode & 0o777) == oct(0o660)
        transport = httpx.HTTPTransport(uds=str(path))
        with httpx.Client(transport=transport) as client:
            r = client.get("http://berth/resource_providers", headers={"x-auth-token": "admin"})
        assert r.status_code == 200, r.text
        # A second server is refused: the socket is in use.
        result = subprocess.run(
            [
                *BERTH,
                "serve",
                "--config-file",
                str(tmp_path / "placement.conf"),
                "--unix-socket",
                str(path),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "OS_PLACEMENT_CONFIG_DIR": ""},
        )
        assert result.returncode == 1
        assert result.stderr.strip().splitlines() == [
            "berth: error: cannot listen on unix:%s: another server listens "
            "there (is another berth serve running?)" % path
        ]
    finally:
        assert finish(srv) == 0, srv.log_text()
    assert not path.exists()


def test_unix_socket_paths_refused_in_one_line(short_dir: Path) -> None:
    (short_dir / "file").write_text("")
    for path, reason in [
        (str(short_dir / "file"), "a file that is not a socket is there"),
        (str(short_dir / "no" / "s.sock"), "no folder"),
        ("/" + "x" * 120, "the path is longer than 107 bytes"),
    ]:
        with pytest.raises(SystemExit) as caught:
            master.check_socket_free(path)
        assert reason in str(caught.value)
    master.check_socket_free(str(short_dir / "free.sock"))


def test_unix_socket_or_host_and_port_not_both() -> None:
    result = subprocess.run(
        [*BERTH, "serve", "--unix-socket", "/tmp/x.sock", "--port", "9"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "berth: error: --unix-socket serves instead of --host and --port: give one or the other"
    )


def test_the_worker_timeout_comes_from_the_configuration(tmp_path: Path) -> None:
    assert master.gunicorn_options(_tls_conf(tmp_path), "h:1", 1)["timeout"] == 120
    conf = _tls_conf(tmp_path, worker_timeout="45")
    assert master.gunicorn_options(conf, "h:1", 1)["timeout"] == 45


def _get(path: str) -> bytes:
    return (
        "GET %s HTTP/1.1\r\nHost: x\r\nx-auth-token: admin\r\nConnection: close\r\n\r\n" % path
    ).encode()


def test_a_misspelled_tls_option_is_refused_not_served_plain(
    tmp_path: Path, certificate: tuple[Path, Path]
) -> None:
    with pytest.raises(check.ConfigProblem) as caught:
        check.check_tls(
            _tls_conf(tmp_path, ssl_certfile=str(certificate[0]), ssl_key_file=str(certificate[1]))
        )
    assert str(caught.value) == (
        "%s: [berth] ssl_certfile is no option (did you mean ssl_cert_file?):"
        " refusing to serve plain HTTP where TLS was meant" % (tmp_path / "tls.conf")
    )
    # Other unknown options stay warnings (berth.conf.check.unknown_names).
    assert check.check_tls(_tls_conf(tmp_path, request_logs="true")) is False
