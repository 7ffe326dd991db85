"""``berth status upgrade check``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from berth.cli import status
from berth.cli.status import Code
from berth.db import migrate, setup
from berth.db import tables as t
from berth.db.engine import Database, create_engine
from tests.conftest import make_conf


def _codes(conf: Any, db: Database) -> dict[str, Code]:
    return {name: r.code for name, r in status.run_checks(conf, db.engine)}


def test_clean_database_passes_every_check(db: Database) -> None:
    assert set(_codes(make_conf(), db).values()) == {Code.SUCCESS}


def test_incomplete_consumer_warns_and_rootless_provider_fails(db: Database) -> None:
    conf = make_conf()
    nil = conf.placement.incomplete_consumer_project_id
    with db.engine.begin() as conn:
        pid = conn.execute(t.projects.insert().values(external_id=nil)).inserted_primary_key[0]
        uid = conn.execute(t.users.insert().values(external_id="real")).inserted_primary_key[0]
        conn.execute(
            t.consumers.insert().values(
                uuid="11111111-1111-1111-1111-111111111111",
                project_id=pid,
                user_id=uid,
                generation=0,
            )
        )
    assert _codes(conf, db)["Incomplete Consumers"] == Code.WARNING
    with db.engine.begin() as conn:
        conn.execute(
            t.resource_providers.insert().values(
                uuid="22222222-2222-2222-2222-222222222222",
                name="orphan",
                generation=0,
                root_provider_id=None,
            )
        )
    results = dict(status.run_checks(conf, db.engine))
    assert results["Missing Root Provider IDs"].code == Code.FAILURE
    assert "1 resource providers" in (results["Missing Root Provider IDs"].details or "")


@pytest.mark.parametrize(
    "text, code, words",
    [
        ('"placement:traits:list": "role:admin"\n', Code.SUCCESS, None),
        ('"placement:nonsense": "role:admin"\n', Code.WARNING, "unknown rule"),
        ('"placement:traits:list": "rule:nowhere"\n', Code.WARNING, "undefined"),
        ('{"placement:traits:list": "role:admin"}', Code.WARNING, "JSON"),
        ('"placement:traits:list": "role:admin or"\n', Code.FAILURE, "do not parse"),
        ('"placement:traits:list": "!"\n', Code.SUCCESS, None),
    ],
)
def test_policy_file_checks(
    db: Database, tmp_path: Path, text: str, code: Code, words: str | None
) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text(text)
    conf = make_conf(oslo_policy__policy_file=str(policy))
    result = status.check_policy(conf, db.engine)
    assert result.code == code
    if words:
        assert words in (result.details or "")


def test_old_schema_skips_data_checks_with_a_warning(tmp_path: Path) -> None:
    engine = create_engine("sqlite:///%s" % (tmp_path / "old.sqlite"))
    migrate.upgrade(engine, "0001")
    results = dict(status.run_checks(make_conf(), engine))
    engine.dispose()
    assert results["Database Migrations"].code == Code.FAILURE
    for name in ("Incomplete Consumers", "Missing Root Provider IDs"):
        assert results[name].code == Code.WARNING
        assert "not current" in (results[name].details or "")


def _check(tmp_path: Path, url: str) -> subprocess.CompletedProcess:
    conf_file = tmp_path / "placement.conf"
    # noauth2: a keystone file without [keystone_authtoken] is a failure.
    conf_file.write_text(
        "[api]\nauth_strategy = noauth2\n[placement_database]\nconnection = %s\n" % url
    )
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "berth.cli",
            "status",
            "upgrade",
            "check",
            "--config-file",
            str(conf_file),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
    )


def test_command_table_and_exit_codes(tmp_path: Path) -> None:
    url = "sqlite:///%s" % (tmp_path / "placement.sqlite")
    none = _check(tmp_path, url)  # no file: the check creates none
    assert none.returncode == 2, none.stderr
    assert "There is no database at %s." % url in " ".join(
        line.strip("| ") for line in none.stdout.splitlines()
    )
    assert none.stdout.count("Skipped: there is no database") == 2
    assert not (tmp_path / "placement.sqlite").exists()
    sa.create_engine(url).connect().close()  # an empty database
    empty = _check(tmp_path, url)
    assert empty.returncode == 2, empty.stderr
    assert "The database %s is at migration none (empty)" % url in " ".join(
        line.strip("| ") for line in empty.stdout.splitlines()
    )
    assert "Check: Database Migrations" in empty.stdout
    assert "berth db sync" in empty.stdout
    # Only the migrations check fails; the data checks it skipped do not.
    assert empty.stdout.count("Result: Failure") == 1
    assert empty.stdout.count("Skipped: the database is empty") == 2
    engine = create_engine(url)
    setup.prepare(engine)
    ready = _check(tmp_path, url)
    assert ready.returncode == 0, ready.stdout
    assert "Result: Failure" not in ready.stdout
    assert ready.stdout.count("Result: Success") == len(status.CHECKS)
    with engine.begin() as conn:
        conn.execute(
            t.projects.insert().values(
                external_id=make_conf().placement.incomplete_consumer_project_id
            )
        )
        pid = conn.execute(sa.select(t.projects.c.id)).scalar_one()
        conn.execute(t.users.insert().values(external_id="u"))
        uid = conn.execute(sa.select(t.users.c.id)).scalar_one()
        conn.execute(
            t.consumers.insert().values(
                uuid="33333333-3333-3333-3333-333333333333",
                project_id=pid,
                user_id=uid,
                generation=0,
            )
        )
    engine.dispose()
    warned = _check(tmp_path, url)
    assert warned.returncode == 1 and "Result: Warning" in warned.stdout
