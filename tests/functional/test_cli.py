"""The command line, run as a user runs it (subprocesses)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from support.processes import BERTH, free_port, run, wait_ready

COMMANDS = [
    [],
    ["serve"],
    ["db"],
    ["db", "sync"],
    ["db", "version"],
    ["policy"],
    ["policy", "list"],
    ["status", "upgrade", "check"],
    ["migrate-inventory"],
    ["explain"],
    ["fit"],
    ["watch"],
]


def write_conf(folder: Path, db: str = "placement.sqlite") -> Path:
    conf = folder / "placement.conf"
    conf.write_text(
        "[api]\nauth_strategy = noauth2\n[placement_database]\n"
        "connection = sqlite:///%s\n" % (folder / db)
    )
    return conf


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_has_help(command):
    result = run(*command, "--help")
    assert result.returncode == 0, result.stderr
    assert "usage: berth" in result.stdout


def test_missing_config_file_is_one_clear_line(tmp_path):
    result = run("db", "sync", "--config-file", str(tmp_path / "nope.conf"))
    assert result.returncode != 0
    lines = result.stderr.strip().splitlines()
    assert lines == ["berth: error: config file %s not found" % (tmp_path / "nope.conf")]


def test_bad_database_url_is_one_clear_line(tmp_path):
    conf = tmp_path / "placement.conf"
    conf.write_text("[placement_database]\nconnection = nosuchdb://x/y\n")
    result = run("db", "sync", "--config-file", str(conf))
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("berth: error:")
    assert len(result.stderr.strip().splitlines()) == 1


def test_db_sync_and_version(tmp_path):
    conf = write_conf(tmp_path)
    before = run("db", "version", "--config-file", str(conf))
    assert before.returncode == 1  # it only reads: it creates no file
    assert before.stderr == (
        "berth: error: there is no database at "
        "sqlite:///%s (run 'berth db sync' to create "
        "it)\n" % (tmp_path / "placement.sqlite")
    )
    assert not (tmp_path / "placement.sqlite").exists()
    assert run("db", "sync", "--config-file", str(conf)).returncode == 0
    after = run("db", "version", "--config-file", str(conf))
    assert after.stdout.splitlines()[0] == "database: sqlite:///%s" % (
        tmp_path / "placement.sqlite"
    )
    current = after.stdout.splitlines()[1].split(": ")[1]
    head = after.stdout.splitlines()[2].split(": ")[1]
    assert current == head


def test_os_placement_config_dir_is_honoured(tmp_path):
    write_conf(tmp_path, "fromenv.sqlite")
    result = run("db", "sync", env={"OS_PLACEMENT_CONFIG_DIR": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "fromenv.sqlite").exists()


def test_policy_list_prints_upstream_rules():
    out = run("policy", "list").stdout
    assert '"placement:resource_providers:list": "rule:admin_or_service_api"' in out
    assert '"placement:reshaper:reshape": "rule:service_api"' in out


@pytest.mark.parametrize("embedded", [True, False], ids=["embedded", "conf"])
def test_serve_answers_and_stops_on_sigterm(tmp_path, embedded):
    port = free_port()
    args = [*BERTH, "serve", "--port", str(port), "--workers", "1"]
    env = {**os.environ, "BERTH_DATA_DIR": str(tmp_path / "data"), "OS_PLACEMENT_CONFIG_DIR": ""}
    if not embedded:
        conf = write_conf(tmp_path)
        run("db", "sync", "--config-file", str(conf))
        args += ["--config-file", str(conf)]
    with subprocess.Popen(args, stderr=subprocess.PIPE, env=env) as proc:
        try:
            body = wait_ready("http://127.0.0.1:%d/" % port, proc)
            assert b'"max_version":"1.39"' in body
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err_bytes = proc.communicate(timeout=20)
        code = proc.returncode
    err = err_bytes.decode()
    assert code == 0, err
    if embedded:
        assert "for local use only" in err
        assert (tmp_path / "data" / "placement.sqlite").exists()


def test_output_into_a_closed_pipe_ends_quietly():
    # `head -1` closes the pipe after one line; with pipefail the
    # command's own exit status counts too.
    cmd = "set -o pipefail; %s -m berth.cli policy list | head -1" % sys.executable
    result = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
    assert result.stdout == '"admin_api": "role:admin"\n'
