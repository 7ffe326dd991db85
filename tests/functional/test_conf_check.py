"""Start-up never weakens security by accident (berth.conf.check and
berth.conf.database_url): a configuration file without a database is
refused, unknown sections and options are named with what was meant,
noauth2 reaches beyond loopback only when a file says so, and a port in
use is one line. Run as a user runs ``berth`` (subprocesses)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from berth import conf as berth_conf
from berth.conf import check

BERTH = [sys.executable, "-m", "berth.cli"]
#: The typo of issue 21: keystone asked for, the database section misspelled.
TYPO = ("[api]\nauth_strategy = keystone\n"
        "[placement_databse]\nconnection = sqlite:///{db}\n")


def run(*args: str, tmp_path: Path, timeout: float = 60
        ) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BERTH_DATA_DIR": str(tmp_path / "data"),
           "OS_PLACEMENT_CONFIG_DIR": ""}
    return subprocess.run([*BERTH, *args], capture_output=True, text=True,
                          timeout=timeout, env=env)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "placement.conf"
    path.write_text(text.format(db=tmp_path / "p.sqlite"))
    return path


def test_a_misspelled_database_section_refuses_to_start(tmp_path: Path) -> None:
    conf = write(tmp_path, TYPO)
    result = run("serve", "--config-file", str(conf), "--port", "1",
                 tmp_path=tmp_path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines == [
        "berth: warning: %s: unknown section [placement_databse] (did you "
        "mean [placement_database]?)" % conf,
        "berth: error: %s: [placement_database] connection is not set "
        "(Berth uses its embedded SQLite database only when no "
        "configuration file is read)" % conf]
    assert not (tmp_path / "data").exists()  # no embedded database made


def test_every_database_command_refuses_a_file_without_a_connection(
        tmp_path: Path) -> None:
    conf = write(tmp_path, "[api]\nauth_strategy = noauth2\n")
    for command in (["db", "sync"], ["db", "version"],
                    ["status", "upgrade", "check"]):
        result = run(*command, "--config-file", str(conf), tmp_path=tmp_path)
        assert result.returncode != 0, command
        assert "[placement_database] connection is not set" in result.stderr
        assert "Traceback" not in result.stderr


def test_unknown_options_name_the_nearest_known_one(tmp_path: Path) -> None:
    conf = write(tmp_path, "[DEFAULT]\ndeubg = true\n[api]\nauth_stratgy = "
                 "noauth2\n[placement_database]\nconnection = sqlite:///{db}\n"
                 "[keystone_authtoken]\nauth_type = password\nusername = p\n"
                 "pasword = x\n[profiler]\nenabled = false\n[zzz]\nq = 1\n")
    loaded = berth_conf.load(["--config-file", str(conf)])
    assert check.unknown_names(loaded) == [
        "%s: [DEFAULT] unknown option deubg (did you mean debug?)" % conf,
        "%s: [api] unknown option auth_stratgy (did you mean auth_strategy?)"
        % conf,
        # username is the password plugin's: known; pasword is not.
        "%s: [keystone_authtoken] unknown option pasword (did you mean "
        "password?)" % conf,
        "%s: unknown section [zzz]" % conf]


def test_deprecated_names_oslo_still_reads_are_not_reported(
        tmp_path: Path) -> None:
    conf = write(tmp_path, "[DEFAULT]\nlog_config = x.ini\n"
                 "[placement_database]\nconnection = sqlite:///{db}\n")
    loaded = berth_conf.load(["--config-file", str(conf)])
    assert check.unknown_names(loaded) == []


def test_strict_config_makes_unknown_names_fatal(tmp_path: Path) -> None:
    text = ("[berth]\nstrict_config = true\n[placement_database]\n"
            "connection = sqlite:///{db}\n[api]\nauth_stratgy = noauth2\n")
    conf = write(tmp_path, text)
    result = run("db", "sync", "--config-file", str(conf), tmp_path=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "berth: error: %s: [api] unknown option auth_stratgy (did you mean "
        "auth_strategy?)" % conf]
    assert not (tmp_path / "p.sqlite").exists()
    # Without strict_config the same file warns and works.
    conf.write_text(conf.read_text().replace("strict_config = true", ""))
    result = run("db", "sync", "--config-file", str(conf), tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("berth: warning: ")


def test_embedded_noauth2_stays_on_loopback(tmp_path: Path) -> None:
    result = run("serve", "--host", "0.0.0.0", "--port", "1",
                 tmp_path=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "berth: error: refusing to serve the embedded database without "
        "authentication on 0.0.0.0: with no configuration file Berth binds "
        "only to a loopback address (127.0.0.1); to serve the network, "
        "write a placement.conf with [placement_database] connection and "
        "[api] auth_strategy"]
    assert not (tmp_path / "data").exists()


def _conf_with(tmp_path: Path, text: str) -> object:
    return berth_conf.load(["--config-file", str(write(tmp_path, text))])


def test_noauth2_beyond_loopback_needs_it_written_in_a_file(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    db = "[placement_database]\nconnection = sqlite:///{db}\n"
    written = _conf_with(tmp_path, db + "[api]\nauth_strategy = noauth2\n")
    check.check_bind(written, "0.0.0.0")  # asked for in the file: allowed
    # The same setting from the environment (oslo.config reads OS_API__*)
    # is refused beyond loopback, and allowed on it.
    monkeypatch.setenv("OS_API__AUTH_STRATEGY", "noauth2")
    from_env = _conf_with(tmp_path, db)
    assert from_env.api.auth_strategy == "noauth2"  # type: ignore[attr-defined]
    with pytest.raises(check.ConfigProblem, match="must be written in a "
                       "configuration file.*came from environment"):
        check.check_bind(from_env, "0.0.0.0")
    check.check_bind(from_env, "127.0.0.1")
    check.check_bind(from_env, "::1")
    check.check_bind(from_env, "localhost")
    monkeypatch.delenv("OS_API__AUTH_STRATEGY")
    keystone = _conf_with(tmp_path, db)
    check.check_bind(keystone, "0.0.0.0")  # keystone: any address


def test_a_port_in_use_is_one_line_before_anything_loads(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = run("serve", "--port", str(port), tmp_path=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "berth: error: cannot listen on 127.0.0.1:%d: Address already in use "
        "(is another berth serve running? choose another --port)" % port]
    assert not (tmp_path / "data").exists()  # refused before the database


def test_the_listed_options_are_exactly_those_registered() -> None:
    """What oslo's tools and the start-up check know (berth.conf.opts) is
    what Berth registers and reads, group by group."""
    from oslo_config import cfg

    from berth.conf import opts
    conf = cfg.ConfigOpts()
    berth_conf.register_opts(conf)
    registered: set[tuple[str, str]] = set()
    for name in conf:
        value = getattr(conf, name)
        if isinstance(value, cfg.ConfigOpts.GroupAttr):
            registered |= {(name, opt) for opt in value}
        else:
            registered.add(("DEFAULT", name))
    listed = {(group, opt.dest) for group, options in opts.list_opts()
              for opt in options}
    # keystoneauth's plugin and session options are loaded by the
    # middleware when it starts, not registered up front.
    plugin = {("keystone_authtoken", opt.dest)
              for opt in opts.auth_token_opts(opts.AUTH_PLUGIN)} - registered
    # oslo.config's command-line options are no file options; oslo.log
    # lists fatal_deprecations (registered when a deprecation is reported).
    cli_only = {("DEFAULT", name) for name in (
        "config_file", "config_dir", "config_source", "shell_completion")}
    assert listed - plugin - {("DEFAULT", "fatal_deprecations")} == (
        registered - cli_only)
