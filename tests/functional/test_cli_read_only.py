"""Commands that only read never create a database: without a
configuration (the embedded default) and no file, each says there is no
database at the path and exits non-zero, leaving the data folder
uncreated; and each names the database it read, its password hidden.

Covers ``berth.db.setup.engine_to_read``, ``berth.cli.common.
readable_conf`` and their callers (``berth status``, ``berth db
version``/``verify``/``export``, ``berth watch``, ``placement-status``,
``placement-manage db version``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent
BERTH = [sys.executable, "-m", "berth.cli"]

#: Each command that only reads, and its exit status without a database.
READERS = [
    (["placement-status", "upgrade", "check"], 2),
    (["placement-status", "upgrade", "check", "--json"], 2),
    ([*BERTH, "status", "upgrade", "check"], 2),
    ([*BERTH, "db", "version"], 1),
    ([str(BIN / "placement-manage"), "db", "version"], 1),
    ([*BERTH, "watch", "--once"], 1),
    ([*BERTH, "db", "export", "--to", "sqlite:///out.sqlite"], 1),
    ([*BERTH, "db", "verify", "--against", "sqlite:///other.sqlite"], 1),
    ([*BERTH, "explain", "resources=VCPU:1"], 1),
    ([*BERTH, "fit", "resources=VCPU:1"], 1),
]


def _env(home: Path) -> dict[str, str]:
    """No configuration file anywhere, and every data folder in ``home``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OS_PLACEMENT", "BERTH_"))}
    return {
        **env,
        "HOME": str(home),
        "XDG_DATA_HOME": str(home / "data"),
        "XDG_CACHE_HOME": str(home.parent / "cache"),
        "OS_PLACEMENT_CONFIG_DIR": "",
    }


@pytest.mark.parametrize(("argv", "code"), READERS, ids=[" ".join(a[-3:]) for a, _ in READERS])
def test_no_database_is_created(tmp_path: Path, argv: list[str], code: int) -> None:
    home = tmp_path / "home"
    home.mkdir()
    if argv[0] == "placement-status":
        argv = [str(BIN / "placement-status"), *argv[1:]]
    result = subprocess.run(
        argv, capture_output=True, text=True, timeout=120, cwd=home, env=_env(home)
    )
    assert result.returncode == code, result.stderr
    assert list(home.iterdir()) == []  # not even the data folder
    url = "sqlite:///%s" % (home / "data" / "berth" / "placement.sqlite")
    said = " ".join(line.strip("| ") for line in result.stdout.splitlines())
    if "--json" in argv:
        [check] = [
            c for c in json.loads(result.stdout)["checks"] if c["check"] == "Database Migrations"
        ]
        assert check["result"] == 2
        assert check["details"].startswith("There is no database at %s." % url)
    elif "check" in argv:
        assert "There is no database at %s." % url in said, said
    else:
        assert result.stderr.endswith(
            "error: there is no database at %s (run 'berth db sync' to create it)\n" % url
        ), result.stderr


PG = "postgresql+psycopg://postgres:s3cret@127.0.0.1:5432/postgres"


def _pg_conf(tmp_path: Path) -> Path:
    conf = tmp_path / "placement.conf"
    conf.write_text("[api]\nauth_strategy = noauth2\n[placement_database]\nconnection = %s\n" % PG)
    return conf


@pytest.mark.skipif(
    "postgresql" not in os.environ.get("BERTH_TEST_DBS", "postgresql"),
    reason="PostgreSQL not tested here",
)
@pytest.mark.parametrize(
    "argv",
    [
        [*BERTH, "status", "upgrade", "check"],
        [*BERTH, "db", "version"],
    ],
)
def test_the_database_is_named_without_its_password(tmp_path: Path, argv: list[str]) -> None:
    """Trust authentication takes any password: the check reads the
    (migration-less) ``postgres`` database and names it with ``***``."""
    result = subprocess.run(
        [*argv, "--config-file", str(_pg_conf(tmp_path))],
        capture_output=True,
        text=True,
        timeout=120,
    )
    said = " ".join(line.strip("| ") for line in result.stdout.splitlines())
    assert "s3cret" not in said + result.stderr
    shown = PG.replace("s3cret", "***")
    if "check" in argv:
        assert result.returncode == 2, result.stderr
        assert "The database %s is at migration none (empty)" % shown in said, said
    else:
        assert result.returncode == 0, result.stderr
        assert result.stdout.startswith("database: %s\n" % shown)
