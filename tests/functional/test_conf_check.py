"""Start-up never weakens security by accident (berth.conf.check and
berth.conf.database_url): a configuration file without a database is
refused, unknown sections and options are named with what was meant,
noauth2 reaches beyond loopback only when a file says so, and a port in
use is one line. Run as a user runs ``berth`` (subprocesses)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from berth import conf as berth_conf
from berth.conf import check

BERTH = [sys.executable, "-m", "berth.cli"]
#: devstack's [keystone_authtoken] (configure_keystone_authtoken_middleware).
DEVSTACK = (
    "[keystone_authtoken]\nauth_type = password\ninterface = public\n"
    "auth_url = http://127.0.0.1/identity\nusername = placement\n"
    "password = secret\nuser_domain_name = Default\n"
    "project_name = service\nproject_domain_name = Default\n"
    "www_authenticate_uri = http://127.0.0.1/identity\n"
    "memcached_servers = localhost:11211\n"
    "cafile = /opt/stack/data/ca-bundle.pem\n"
    "service_token_roles_required = True\n"
)
#: The typo of issue 21: keystone asked for, the database section misspelled.
TYPO = (
    "[api]\nauth_strategy = keystone\n[placement_databse]\nconnection = sqlite:///{db}\n" + DEVSTACK
)


def run(*args: str, tmp_path: Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BERTH_DATA_DIR": str(tmp_path / "data"), "OS_PLACEMENT_CONFIG_DIR": ""}
    return subprocess.run([*BERTH, *args], capture_output=True, text=True, timeout=timeout, env=env)


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "placement.conf"
    path.write_text(text.format(db=tmp_path / "p.sqlite"))
    return path


def test_a_misspelled_database_section_refuses_to_start(tmp_path: Path) -> None:
    conf = write(tmp_path, TYPO)
    result = run("serve", "--config-file", str(conf), "--port", "1", tmp_path=tmp_path)
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert lines == [
        "berth: warning: %s: unknown section [placement_databse] (did you "
        "mean [placement_database]?)" % conf,
        "berth: error: %s: [placement_database] connection is not set "
        "(Berth uses its embedded SQLite database only when no "
        "configuration file is read)" % conf,
    ]
    assert not (tmp_path / "data").exists()  # no embedded database made


def test_every_database_command_refuses_a_file_without_a_connection(tmp_path: Path) -> None:
    conf = write(tmp_path, "[api]\nauth_strategy = noauth2\n")
    for command in (["db", "sync"], ["db", "version"], ["status", "upgrade", "check"]):
        result = run(*command, "--config-file", str(conf), tmp_path=tmp_path)
        assert result.returncode != 0, command
        assert "[placement_database] connection is not set" in result.stderr
        assert "Traceback" not in result.stderr


def test_unknown_options_name_the_nearest_known_one(tmp_path: Path) -> None:
    conf = write(
        tmp_path,
        "[DEFAULT]\ndeubg = true\n[api]\nauth_stratgy = "
        "noauth2\n[placement_database]\nconnection = sqlite:///{db}\n"
        "[keystone_authtoken]\nauth_type = password\nusername = p\n"
        "pasword = x\n[profiler]\nenabled = false\n[zzz]\nq = 1\n",
    )
    loaded = berth_conf.load(["--config-file", str(conf)])
    assert check.unknown_names(loaded) == [
        "%s: [DEFAULT] unknown option deubg (did you mean debug?)" % conf,
        "%s: [api] unknown option auth_stratgy (did you mean auth_strategy?)" % conf,
        # username is the password plugin's: known; pasword is not.
        "%s: [keystone_authtoken] unknown option pasword (did you mean password?)" % conf,
        "%s: unknown section [zzz]" % conf,
    ]


def test_deprecated_names_oslo_still_reads_are_not_reported(tmp_path: Path) -> None:
    conf = write(
        tmp_path,
        "[DEFAULT]\nlog_config = x.ini\n[placement_database]\nconnection = sqlite:///{db}\n",
    )
    loaded = berth_conf.load(["--config-file", str(conf)])
    assert check.unknown_names(loaded) == []


def test_strict_config_makes_unknown_names_fatal(tmp_path: Path) -> None:
    text = (
        "[berth]\nstrict_config = true\n[placement_database]\n"
        "connection = sqlite:///{db}\n[api]\nauth_stratgy = noauth2\n"
    )
    conf = write(tmp_path, text)
    result = run("db", "sync", "--config-file", str(conf), tmp_path=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "berth: error: %s: [api] unknown option auth_stratgy (did you mean auth_strategy?)" % conf
    ]
    assert not (tmp_path / "p.sqlite").exists()
    # Without strict_config the same file warns and works.
    conf.write_text(conf.read_text().replace("strict_config = true", ""))
    result = run("db", "sync", "--config-file", str(conf), tmp_path=tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stderr.startswith("berth: warning: ")


def test_embedded_noauth2_stays_on_loopback(tmp_path: Path) -> None:
    result = run("serve", "--host", "0.0.0.0", "--port", "1", tmp_path=tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "berth: error: refusing to serve the embedded database without "
        "authentication on 0.0.0.0: with no configuration file Berth binds "
        "only to a loopback address (127.0.0.1); to serve the network, "
        "write a placement.conf with [placement_database] connection and "
        "[api] auth_strategy"
    ]
    assert not (tmp_path / "data").exists()


def _conf_with(tmp_path: Path, text: str) -> object:
    return berth_conf.load(["--config-file", str(write(tmp_path, text))])


def test_noauth2_beyond_loopback_needs_it_written_in_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = "[placement_database]\nconnection = sqlite:///{db}\n"
    written = _conf_with(tmp_path, db + "[api]\nauth_strategy = noauth2\n")
    check.check_bind(written, "0.0.0.0")  # asked for in the file: allowed
    # The same setting from the environment (oslo.config reads OS_API__*)
    # is refused beyond loopback, and allowed on it.
    monkeypatch.setenv("OS_API__AUTH_STRATEGY", "noauth2")
    from_env = _conf_with(tmp_path, db)
    assert from_env.api.auth_strategy == "noauth2"  # type: ignore[attr-defined]
    with pytest.raises(
        check.ConfigProblem, match="must be written in a configuration file.*came from environment"
    ):
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
        "(is another berth serve running? choose another --port)" % port
    ]
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
    listed = {(group, opt.dest) for group, options in opts.list_opts() for opt in options}
    # keystoneauth's plugin and session options are loaded by the
    # middleware when it starts, not registered up front.
    plugin = {
        ("keystone_authtoken", opt.dest) for opt in opts.auth_token_opts(opts.AUTH_PLUGIN)
    } - registered
    # oslo.config's command-line options are no file options; oslo.log
    # lists fatal_deprecations (registered when a deprecation is reported).
    cli_only = {
        ("DEFAULT", name)
        for name in ("config_file", "config_dir", "config_source", "shell_completion")
    }
    assert listed - plugin - {("DEFAULT", "fatal_deprecations")} == (registered - cli_only)


KEYSTONE = "[api]\nauth_strategy = keystone\n[placement_database]\nconnection = sqlite:///{db}\n"
#: Each Keystone setup with which no token could be validated, and the
#: start of the one line that refuses it (after "FILE: ").
UNUSABLE = {
    "missing-section": (
        "",
        "[keystone_authtoken] is missing: with [api] "
        "auth_strategy = keystone, keystonemiddleware "
        "needs it to validate tokens (auth_type = "
        "password with auth_url",
    ),
    "misspelled-section": (
        DEVSTACK.replace("[keystone_authtoken]", "[keystone_authtokn]"),
        "[keystone_authtoken] is missing: ",
    ),
    "missing-auth-url": (
        DEVSTACK.replace("auth_url", "#"),
        "[keystone_authtoken] auth_type = password needs auth_url to sign in to Keystone",
    ),
    "missing-auth-plugin": (
        DEVSTACK.replace("auth_type", "#"),
        "[keystone_authtoken] sets no auth_type: ",
    ),
    "unknown-auth-plugin": (
        DEVSTACK.replace("= password\n", "= pasword\n", 1),
        "[keystone_authtoken] auth_type = pasword is no "
        "keystoneauth plugin Berth can load (did you "
        "mean password?)",
    ),
    "missing-user": (
        DEVSTACK.replace("username", "#"),
        "[keystone_authtoken] auth_type = password needs username (or user_id) to sign in",
    ),
}


@pytest.mark.parametrize("case", sorted(UNUSABLE))
def test_keystone_that_cannot_validate_tokens_refuses_to_start(tmp_path: Path, case: str) -> None:
    section, refusal = UNUSABLE[case]
    conf = write(tmp_path, KEYSTONE + section)
    result = run("serve", "--config-file", str(conf), "--port", "1", tmp_path=tmp_path)
    assert result.returncode == 1, result.stderr
    errors = [
        line for line in result.stderr.splitlines() if not line.startswith("berth: warning: ")
    ]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith("berth: error: %s: %s" % (conf, refusal))
    assert not (tmp_path / "p.sqlite").exists()  # refused before the database
    if case == "misspelled-section":  # the warning names the typo
        assert result.stderr.splitlines()[0] == (
            "berth: warning: %s: unknown section [keystone_authtokn] (did you "
            "mean [keystone_authtoken]?)" % conf
        )


def test_the_wsgi_app_and_the_upgrade_check_refuse_it_too(tmp_path: Path) -> None:
    conf = write(tmp_path, KEYSTONE)
    env = {**os.environ, "OS_PLACEMENT_CONFIG_DIR": str(tmp_path)}
    wsgi = subprocess.run(
        [sys.executable, "-c", "import berth.wsgi"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert wsgi.returncode == 1  # the import fails, as the server logs
    assert "ConfigProblem: %s: %s\n" % (conf, _problem(conf)) in wsgi.stderr
    status = run(
        "status", "upgrade", "check", "--json", "--config-file", str(conf), tmp_path=tmp_path
    )
    assert status.returncode == 2
    checks = {c["check"]: c for c in json.loads(status.stdout)["checks"]}
    assert checks["Keystone Authentication"]["result"] == 2
    assert checks["Keystone Authentication"]["details"] == ("%s: %s" % (conf, _problem(conf)))


def _problem(conf: Path) -> str:
    """What check_auth says of ``conf``, without its "FILE: "."""
    with pytest.raises(check.ConfigProblem) as refused:
        check.check_auth(berth_conf.load(["--config-file", str(conf)]))
    return str(refused.value).split(": ", 1)[1]


def test_upstream_keystone_configurations_are_accepted(tmp_path: Path) -> None:
    """devstack's section, the real-Keystone suite's (tests/keystone),
    and one whose plugin options live in the section auth_section names:
    no refusal, and nothing reported unknown."""
    from types import SimpleNamespace

    from support.keystone import authtoken_conf

    real = authtoken_conf(SimpleNamespace(url="http://127.0.0.1:5000"))  # type: ignore[arg-type]
    sections = {
        "devstack": DEVSTACK,
        "tests-keystone": "[keystone_authtoken]\n"
        + "".join("%s = %s\n" % item for item in real.items()),
        "auth-section": "[keystone_authtoken]\nauth_section = service_user\n"
        "www_authenticate_uri = http://k:5000\n"
        "[service_user]\nauth_type = password\n"
        "auth_url = http://k:5000\nusername = placement\n"
        "password = secret\nproject_name = service\n",
    }
    for name, section in sections.items():
        loaded = _conf_with(tmp_path, KEYSTONE + section)
        check.check_auth(loaded)  # type: ignore[arg-type]
        assert check.unknown_names(loaded) == [], name  # type: ignore[arg-type]


def test_a_good_keystone_configuration_serves(tmp_path: Path) -> None:
    """devstack's section starts; a request without a token is keystone's
    401 naming www_authenticate_uri (no Keystone needed for that)."""
    from support.processes import Server, free_port

    conf = write(tmp_path, KEYSTONE.replace("{db}", "{db}\nsync_on_startup = true") + DEVSTACK)
    port, log = free_port(), tmp_path / "serve.log"
    env = {**os.environ, "OS_PLACEMENT_CONFIG_DIR": ""}
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [*BERTH, "serve", "--config-file", str(conf), "--port", str(port), "--workers", "1"],
            stderr=sink,
            stdout=subprocess.DEVNULL,
            env=env,
        )
    srv = Server(proc, port, log)
    try:
        srv.wait_log("serving Placement API")
        status, headers, _ = srv.raw(
            b"GET /resource_providers HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        assert status.startswith("HTTP/1.1 401"), status
        assert headers["www-authenticate"] == ('Keystone uri="http://127.0.0.1/identity"')
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
    assert "berth: warning" not in srv.log_text()
