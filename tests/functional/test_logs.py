"""Logs through oslo.log, configured by real placement.conf files."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
from pathlib import Path

from berth import conf as berth_conf
from berth import logs
from support.processes import BERTH, free_port, run, wait_ready


def _conf(tmp_path: Path, text: str) -> object:
    path = tmp_path / "placement.conf"
    path.write_text(text)
    return berth_conf.load(["--config-file", str(path)])


def test_log_file_debug_and_levels(tmp_path: Path, root_logging: None) -> None:
    conf = _conf(
        tmp_path,
        "[DEFAULT]\ndebug = True\nlog_file = %s\n"
        "default_log_levels = berth.quiet=ERROR\n" % (tmp_path / "b.log"),
    )
    logs.setup(conf)  # type: ignore[arg-type]
    logging.getLogger("berth.test").debug("shown at debug")
    logging.getLogger("berth.quiet").warning("hidden below error")
    text = (tmp_path / "b.log").read_text()
    assert "DEBUG berth.test" in text and "shown at debug" in text
    assert "hidden below error" not in text


def test_log_dir_names_the_file_after_the_program(tmp_path: Path, root_logging: None) -> None:
    conf = _conf(tmp_path, "[DEFAULT]\nlog_dir = %s\n" % tmp_path)
    logs.setup(conf)  # type: ignore[arg-type]
    logging.getLogger("berth.test").info("into the folder")
    found = [p for p in tmp_path.glob("*.log") if "into the folder" in p.read_text()]
    assert len(found) == 1


def test_log_config_append_takes_over(tmp_path: Path, root_logging: None) -> None:
    ini = tmp_path / "logging.ini"
    ini.write_text(
        "[loggers]\nkeys=root\n[handlers]\nkeys=file\n[formatters]\n"
        "keys=bare\n[logger_root]\nlevel=INFO\nhandlers=file\n"
        "[handler_file]\nclass=FileHandler\nformatter=bare\n"
        "args=(%r,)\n[formatter_bare]\nformat=CUSTOM %%(message)s\n" % str(tmp_path / "custom.log")
    )
    conf = _conf(tmp_path, "[DEFAULT]\nlog_config_append = %s\n" % ini)
    logs.setup(conf)  # type: ignore[arg-type]
    logging.getLogger("berth.test").info("via the ini file")
    for handler in logging.getLogger().handlers:
        handler.flush()
    assert (tmp_path / "custom.log").read_text() == "CUSTOM via the ini file\n"


def test_use_syslog_adds_a_syslog_handler(tmp_path: Path, root_logging: None) -> None:
    from oslo_log import handlers

    conf = _conf(tmp_path, "[DEFAULT]\nuse_syslog = True\nlog_file = %s\n" % (tmp_path / "b.log"))
    logs.setup(conf)  # type: ignore[arg-type]
    kinds = {type(h) for h in logging.getLogger().handlers}
    assert handlers.OSSysLogHandler in kinds


def test_no_file_means_stderr(tmp_path: Path, root_logging: None) -> None:
    conf = _conf(tmp_path, "")
    logs.setup(conf)  # type: ignore[arg-type]
    streams = [getattr(h, "stream", None) for h in logging.getLogger().handlers]
    assert streams == [__import__("sys").stderr]


def _serve_once(tmp_path: Path, extra: str) -> list[str]:
    """``berth serve`` (two workers) with ``extra`` in [DEFAULT], one
    request from user alice of project p1; the log file's lines."""
    port = free_port()
    log_file = tmp_path / "berth.log"
    conf = tmp_path / "placement.conf"
    conf.write_text(
        "[DEFAULT]\nlog_file = %s\n%s\n[api]\nauth_strategy = noauth2\n"
        "[placement_database]\nconnection = sqlite:///%s\n"
        % (log_file, extra, tmp_path / "p.sqlite")
    )
    run("db", "sync", "--config-file", str(conf))
    env = {**os.environ, "OS_PLACEMENT_CONFIG_DIR": ""}
    args = [*BERTH, "serve", "--port", str(port), "--workers", "2", "--config-file", str(conf)]
    with subprocess.Popen(args, stderr=subprocess.PIPE, env=env) as proc:
        try:
            wait_ready("http://127.0.0.1:%d/" % port, proc)
            import urllib.request

            req = urllib.request.Request(
                "http://127.0.0.1:%d/resource_providers" % port,
                headers={"x-auth-token": "alice:p1", "x-roles": "admin"},
            )
            with urllib.request.urlopen(req, timeout=10) as resp:
                request_id = resp.headers["x-openstack-request-id"]
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err.decode()
    assert err == b""  # everything went to the file
    lines = log_file.read_text().splitlines()
    return [line for line in lines if line] + [request_id]


def test_serve_writes_one_format_to_log_file(tmp_path: Path) -> None:
    *lines, request_id = _serve_once(tmp_path, "")
    [request] = [line for line in lines if request_id in line and " berth.request " in line]
    assert [line for line in lines if request_id in line] == [request]
    assert " INFO berth.request [" in request
    assert "%s alice p1 " % request_id in request
    assert '"GET /resource_providers" status: 200' in request
    gunicorn = [line for line in lines if " gunicorn.error " in line]
    assert any("Booting worker" in line for line in gunicorn)
    # Same shape as Berth's own lines: date, time, pid, level, logger.
    for line in gunicorn + [request]:
        date, clock, pid, level = line.split(" ")[:4]
        assert len(date) == 10 and pid.isdigit() and level == "INFO"


def test_serve_writes_json_lines(tmp_path: Path) -> None:
    *lines, request_id = _serve_once(tmp_path, "use_json = True")
    records = [json.loads(line) for line in lines]
    [request] = [
        r for r in records if r["name"] == "berth.request" and "/resource_providers" in r["message"]
    ]
    assert request["context"]["request_id"] == request_id
    assert request["context"]["user"] == "alice"
    assert request["context"]["project_id"] == "p1"
    assert any(r["name"] == "gunicorn.error" for r in records)
