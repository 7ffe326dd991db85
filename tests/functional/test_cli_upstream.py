"""``placement-manage`` and ``placement-status``: upstream's commands and
exit codes, as deployment tools call them."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from berth.cli.upstream import manage_main, status_main
from berth.db import migrate
from berth.db import tables as t
from berth.db.engine import Database
from berth.domain import online

BIN = Path(sys.executable).parent


def _script(name: str, conf: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / name), "--config-file", str(conf), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def _conf_file(folder: Path, url: str) -> Path:
    path = folder / "placement.conf"
    # noauth2: a keystone file without [keystone_authtoken] is a failure.
    path.write_text("[api]\nauth_strategy = noauth2\n[placement_database]\nconnection = %s\n" % url)
    return path


def test_db_sync_version_and_stamp(tmp_path: Path) -> None:
    url = "sqlite:///%s" % (tmp_path / "p.sqlite")
    conf = _conf_file(tmp_path, url)
    none = _script("placement-manage", conf, "db", "version")
    assert none.returncode == 1 and not (tmp_path / "p.sqlite").exists()
    assert none.stderr == (
        "placement-manage: error: there is no database "
        "at %s (run 'berth db sync' to create it)\n" % url
    )
    sa.create_engine(url).connect().close()  # an empty database
    empty = _script("placement-manage", conf, "db", "version")
    assert (empty.returncode, empty.stdout) == (0, "None\n"), empty.stderr
    synced = _script("placement-manage", conf, "db", "sync")
    assert synced.returncode == 0, synced.stderr
    head = _script("placement-manage", conf, "db", "version").stdout.strip()
    assert head == migrate.head_revision()
    assert _script("placement-manage", conf, "db", "stamp", "0001").returncode == 0
    assert _script("placement-manage", conf, "db", "version").stdout == "0001\n"
    bad = _script("placement-manage", conf, "db", "stamp", "nope")
    assert bad.returncode == 1
    assert bad.stderr.strip() == (
        "placement-manage: error: Can't locate revision identified by 'nope'"
    )
    # The stamp moved the record only: stamp it back.
    assert _script("placement-manage", conf, "db", "stamp", "head").returncode == 0
    helped = _script("placement-manage", conf, "db")
    assert helped.returncode == 0 and "online_data_migrations" in helped.stdout


def test_placement_status_exit_codes(tmp_path: Path) -> None:
    url = "sqlite:///%s" % (tmp_path / "p.sqlite")
    conf = _conf_file(tmp_path, url)
    empty = _script("placement-status", conf, "upgrade", "check")
    assert empty.returncode == 2, empty.stderr
    assert "Check: Database Migrations" in empty.stdout
    assert "There is no database at %s." % url in " ".join(
        line.strip("| ") for line in empty.stdout.splitlines()
    )
    assert not (tmp_path / "p.sqlite").exists()  # the check made none
    assert _script("placement-manage", conf, "db", "sync").returncode == 0
    ready = _script("placement-status", conf, "upgrade", "check", "--json")
    assert ready.returncode == 0, ready.stderr
    document = json.loads(ready.stdout)
    assert document["name"] == "Upgrade Check Results"
    assert {c["result"] for c in document["checks"]} == {0}
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(t.projects.insert().values(external_id="00000000-0000-0000-0000-000000000000"))
        conn.execute(t.users.insert().values(external_id="u"))
        conn.execute(
            t.consumers.insert().values(
                uuid=str(uuid.uuid4()), project_id=1, user_id=1, generation=0
            )
        )
    engine.dispose()
    warned = _script("placement-status", conf, "upgrade", "check")
    assert warned.returncode == 1 and "Result: Warning" in warned.stdout
    wrong = _script("placement-status", conf, "upgrade", "nope")
    assert wrong.returncode == 2 and "invalid choice" in wrong.stderr


def test_placement_status_crash_is_255(tmp_path: Path, monkeypatch: Any, capsys: Any) -> None:
    from berth.cli import status

    def boom(*args: Any) -> None:
        raise RuntimeError("checks exploded")

    monkeypatch.setattr(status, "run_checks", boom)
    conf = _conf_file(tmp_path, "sqlite:///%s" % (tmp_path / "p.sqlite"))
    code = status_main(["--config-file", str(conf), "upgrade", "check"])
    assert code == 255
    assert capsys.readouterr().out == "Error:\nchecks exploded\n"


def _rootless_tree(db: Database) -> list[int]:
    """A root, its child and grandchild, none with a root id; and
    allocations for two consumers that have no consumers row."""
    rp = t.resource_providers

    def write(conn: sa.Connection) -> list[int]:
        ids: list[int] = []
        for n in range(3):
            ids.append(
                int(
                    conn.execute(
                        rp.insert().values(
                            uuid=str(uuid.uuid4()),
                            name="rp%d" % n,
                            generation=0,
                            parent_provider_id=ids[-1] if ids else None,
                            root_provider_id=None,
                        )
                    ).inserted_primary_key[0]
                )
            )
        vcpu = conn.execute(
            sa.select(t.resource_classes.c.id).where(t.resource_classes.c.name == "VCPU")
        ).scalar_one()
        for consumer in (str(uuid.uuid4()), str(uuid.uuid4())):
            conn.execute(
                t.allocations.insert().values(
                    resource_provider_id=ids[0],
                    resource_class_id=vcpu,
                    consumer_id=consumer,
                    used=1,
                )
            )
        return ids

    return db.run(write)


def _manage(conf: Path, *args: str) -> int:
    return manage_main(["--config-file", str(conf), "db", *args])


def test_online_data_migrations(db: Database, db_url: str, tmp_path: Path, capsys: Any) -> None:
    ids = _rootless_tree(db)
    conf = _conf_file(tmp_path, db_url)
    assert _manage(conf, "online_data_migrations", "--max-count", "x") == 127
    assert _manage(conf, "online_data_migrations", "--max-count", "0") == 127
    assert "Must supply a positive value for max_count" in capsys.readouterr().out
    # One row per batch: the root first, then work remains.
    assert _manage(conf, "online_data_migrations", "--max-count", "1") == 1
    out = capsys.readouterr().out
    assert "3 rows matched query set_root_provider_ids, 1 migrated" not in out
    assert "1 rows matched query set_root_provider_ids, 1 migrated" in out
    # Unlimited: batches until nothing moves, then 0.
    assert _manage(conf, "online_data_migrations") == 0
    out = capsys.readouterr().out
    assert out.startswith("Running batches of 50 until complete\n")
    assert "| create_incomplete_consumers | 2           | 2         |" in out
    rp = t.resource_providers
    roots = db.read(
        lambda conn: conn.execute(sa.select(rp.c.id, rp.c.root_provider_id).order_by(rp.c.id)).all()
    )
    assert [tuple(r) for r in roots] == [(i, ids[0]) for i in ids]
    nil = "00000000-0000-0000-0000-000000000000"
    owners = db.read(
        lambda conn: conn.execute(
            sa.select(t.projects.c.external_id).select_from(
                t.consumers.join(t.projects, t.consumers.c.project_id == t.projects.c.id)
            )
        ).all()
    )
    assert [o[0] for o in owners] == [nil, nil]
    # Nothing left: 0 again, and idempotent.
    assert _manage(conf, "online_data_migrations", "--max-count", "5") == 0


def test_online_data_migration_failure_is_2(
    db: Database, db_url: str, tmp_path: Path, monkeypatch: Any, capsys: Any
) -> None:
    def broken(conn: Any, conf: Any, count: int) -> tuple[int, int]:
        raise RuntimeError("no")

    monkeypatch.setattr(online, "MIGRATIONS", [("broken", broken)] + online.MIGRATIONS)
    conf = _conf_file(tmp_path, db_url)
    assert _manage(conf, "online_data_migrations") == 2
    out = capsys.readouterr().out
    assert "Error attempting to run broken" in out
    assert "Some migrations failed unexpectedly. Check log for details." in out


@pytest.mark.parametrize("name", ["placement-manage", "placement-status"])
def test_help(name: str) -> None:
    result = subprocess.run([str(BIN / name), "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "usage: %s" % name in result.stdout
