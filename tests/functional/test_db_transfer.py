"""``berth db import`` and ``berth db export`` on hand-built upstream
databases (SQLite files written with ``upstream.head_metadata``), into a
Berth database of each backend. The comparison with a real upstream server
is in test_db_transfer_upstream.py (stress)."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import os_resource_classes
import pytest
import sqlalchemy as sa

from berth.db import tables as t
from berth.db import transfer, upstream
from berth.db.transfer_report import Report

STD = list(os_resource_classes.STANDARDS)
VCPU, MEM, DISK = STD.index("VCPU"), STD.index("MEMORY_MB"), STD.index("DISK_GB")
ROOT, CHILD, SHARED, LONE = ("%08d-0000-0000-0000-000000000000" % i for i in range(1, 5))
AGG = "aaaaaaaa-0000-0000-0000-000000000001"
C1, C2 = "c0000001-0000-0000-0000-000000000000", "c0000002-0000-0000-0000-000000000000"
NIL = "00000000-0000-0000-0000-000000000000"
STAMP = dt.datetime(2024, 5, 6, 7, 8, 9)


def make_source(path: Path, revision: str = upstream.HEAD, standard_stored: bool = True) -> str:
    """An upstream database: a root with a NUMA-like child, a sharing disk
    provider in an aggregate, a custom class and trait, two consumers."""
    url = "sqlite:///%s" % path
    engine = sa.create_engine(url)
    md = upstream.head_metadata()
    typed = upstream.has_consumer_types(revision)
    md.create_all(
        engine,
        tables=[
            tb for tb in md.sorted_tables if typed or tb.name not in ("consumer_types", "consumers")
        ],
    )
    tb = md.tables
    with engine.begin() as conn:
        if not typed:  # the consumers table before 422ece571366
            conn.exec_driver_sql(
                "CREATE TABLE consumers (created_at DATETIME, updated_at DATETIME, "
                "id INTEGER PRIMARY KEY, uuid VARCHAR(36) NOT NULL, project_id "
                "INTEGER NOT NULL, user_id INTEGER NOT NULL, generation INTEGER "
                "NOT NULL DEFAULT 0)"
            )
        conn.execute(tb["alembic_version"].insert().values(version_num=revision))
        if standard_stored:
            conn.execute(
                tb["resource_classes"].insert(), [{"id": i, "name": n} for i, n in enumerate(STD)]
            )
        conn.execute(
            tb["resource_classes"].insert().values(id=10000, name="CUSTOM_FPGA", created_at=STAMP)
        )
        conn.execute(
            tb["traits"].insert(),
            [
                {"id": 7, "name": "HW_CPU_X86_AVX2"},
                {"id": 9, "name": "CUSTOM_GOLD"},
                {"id": 8, "name": "MISC_SHARES_VIA_AGGREGATE"},
            ],
        )
        conn.execute(tb["projects"].insert(), [{"id": 3, "external_id": "proj-a"}])
        conn.execute(tb["users"].insert(), [{"id": 4, "external_id": "user-a"}])
        root_of_root = None if not typed else 11
        conn.execute(
            tb["resource_providers"].insert(),
            [
                {
                    "id": 11,
                    "uuid": ROOT,
                    "name": "cn1",
                    "generation": 5,
                    "root_provider_id": root_of_root,
                    "parent_provider_id": None,
                },
                {
                    "id": 12,
                    "uuid": CHILD,
                    "name": "cn1_numa0",
                    "generation": 2,
                    "root_provider_id": root_of_root,
                    "parent_provider_id": 11,
                },
                {
                    "id": 13,
                    "uuid": SHARED,
                    "name": "disk",
                    "generation": None,
                    "root_provider_id": 13,
                    "parent_provider_id": None,
                },
                {
                    "id": 14,
                    "uuid": LONE,
                    "name": "lone",
                    "generation": 0,
                    "root_provider_id": 14,
                    "parent_provider_id": None,
                },
            ],
        )
        conn.execute(tb["placement_aggregates"].insert(), [{"id": 2, "uuid": AGG}])
        conn.execute(
            tb["resource_provider_aggregates"].insert(),
            [
                {"resource_provider_id": 11, "aggregate_id": 2},
                {"resource_provider_id": 13, "aggregate_id": 2},
            ],
        )
        conn.execute(
            tb["resource_provider_traits"].insert(),
            [
                {"resource_provider_id": 12, "trait_id": 7},
                {"resource_provider_id": 13, "trait_id": 9},
                {"resource_provider_id": 13, "trait_id": 8},
            ],
        )

        def inv(rp: int, rc: int, total: int, ratio: float = 1.0) -> dict[str, Any]:
            return {
                "resource_provider_id": rp,
                "resource_class_id": rc,
                "total": total,
                "reserved": 1,
                "min_unit": 1,
                "max_unit": total,
                "step_size": 1,
                "allocation_ratio": ratio,
            }

        conn.execute(
            tb["inventories"].insert(),
            [
                inv(12, VCPU, 16, 4.0),
                inv(11, MEM, 4096, 1.5),
                inv(13, DISK, 1000),
                inv(14, 10000, 2),
            ],
        )
        if typed:
            conn.execute(tb["consumer_types"].insert(), [{"id": 1, "name": "INSTANCE"}])
        conn.execute(
            tb["consumers"].insert(),
            [
                {
                    "id": 21,
                    "uuid": C1,
                    "project_id": 3,
                    "user_id": 4,
                    "generation": 3,
                    **({"consumer_type_id": 1} if typed else {}),
                }
            ],
        )
        conn.execute(
            tb["allocations"].insert(),
            [
                {
                    "resource_provider_id": 12,
                    "consumer_id": C1,
                    "resource_class_id": VCPU,
                    "used": 2,
                },
                {
                    "resource_provider_id": 11,
                    "consumer_id": C1,
                    "resource_class_id": MEM,
                    "used": 512,
                },
                {
                    "resource_provider_id": 13,
                    "consumer_id": C1,
                    "resource_class_id": DISK,
                    "used": 10,
                },
                # C2 has no consumer record: possible before b5c396305c25.
                {
                    "resource_provider_id": 14,
                    "consumer_id": C2,
                    "resource_class_id": 10000,
                    "used": 1,
                },
            ],
        )
    engine.dispose()
    return url


def run_import(db, url: str, **kw: Any) -> Report:
    return transfer.import_database(url, db, incomplete_ids=(NIL, NIL), **kw)


def test_import_answers_like_the_source(db, client, tmp_path):
    report = run_import(db, make_source(tmp_path / "up.sqlite"))
    assert report.ok and report.revision == upstream.HEAD
    counts = {c.table: (c.source, c.added, c.target) for c in report.tables}
    assert counts["resource_providers"] == (4, 0, 4)
    assert counts["allocations"] == (4, 0, 4)
    assert counts["consumers"] == (1, 1, 2)  # C2 made up, as upstream would
    assert not any(report.checks.values())
    child = client.get("/resource_providers/%s" % CHILD).json()
    assert (child["generation"], child["root_provider_uuid"], child["parent_provider_uuid"]) == (
        2,
        ROOT,
        ROOT,
    )
    assert client.get("/resource_providers/%s" % SHARED).json()["generation"] == 0
    c1 = client.get("/allocations/%s" % C1).json()
    assert (c1["consumer_generation"], c1["project_id"], c1["user_id"], c1["consumer_type"]) == (
        3,
        "proj-a",
        "user-a",
        "INSTANCE",
    )
    assert c1["allocations"][CHILD]["resources"] == {"VCPU": 2}
    c2 = client.get("/allocations/%s" % C2).json()
    assert (c2["project_id"], c2["allocations"][LONE]["resources"]) == (NIL, {"CUSTOM_FPGA": 1})
    inv = client.get("/resource_providers/%s/inventories" % CHILD).json()
    assert inv["inventories"]["VCPU"]["allocation_ratio"] == 4.0
    assert sorted(client.get("/resource_providers/%s/traits" % SHARED).json()["traits"]) == [
        "CUSTOM_GOLD",
        "MISC_SHARES_VIA_AGGREGATE",
    ]
    assert client.get("/resource_providers/%s/aggregates" % SHARED).json()["aggregates"] == [AGG]
    assert client.get("/resource_providers/%s/usages" % ROOT).json()["usages"] == {"MEMORY_MB": 512}
    assert client.at("1.9").get("/usages?project_id=proj-a").json()["usages"] == {
        "VCPU": 2,
        "MEMORY_MB": 512,
        "DISK_GB": 10,
    }
    # The candidate cache sees the imported world (sharing disk included).
    ac = client.get("/allocation_candidates?resources=VCPU:1,MEMORY_MB:100,DISK_GB:5").json()
    assert len(ac["allocation_requests"]) == 1
    assert set(ac["allocation_requests"][0]["allocations"]) == {ROOT, CHILD, SHARED}
    # Berth keeps working on it: a new class and a new provider get fresh ids.
    assert client.put("/resource_classes/CUSTOM_NEW").status_code == 201
    assert client.post("/resource_providers", json={"name": "new"}).status_code in (200, 201)


@pytest.mark.parametrize("revision", upstream.REVISIONS[:3])
def test_import_reads_old_revisions(db, client, tmp_path, revision):
    """Before 422ece571366: no consumer types; before b5c396305c25 roots
    may be missing; standard classes may never have been stored."""
    url = make_source(tmp_path / "old.sqlite", revision, standard_stored=False)
    report = run_import(db, url)
    assert report.ok and report.revision == revision
    added = {c.table: c.added for c in report.tables}
    assert added["resource_classes"] == 3 and added["consumers"] == 1
    child = client.get("/resource_providers/%s" % CHILD).json()
    assert child["root_provider_uuid"] == ROOT
    c1 = client.get("/allocations/%s" % C1).json()
    assert c1["consumer_generation"] == 3 and c1["consumer_type"] == "unknown"


def test_refusals_leave_the_target_alone(db, tmp_path):
    src = tmp_path / "up.sqlite"
    url = make_source(src)
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = 'deadbeef0000'")
    with pytest.raises(upstream.UnsupportedSchema, match="revision deadbeef0000"):
        run_import(db, url)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = :v", (upstream.HEAD,))
        # A dangling allocation: the copy fails part-way and leaves nothing.
        conn.exec_driver_sql(
            "INSERT INTO allocations (resource_provider_id, consumer_id, "
            "resource_class_id, used) VALUES (99, :c, 0, 1)",
            (C1,),
        )
    engine.dispose()
    with pytest.raises(transfer.TransferError, match="nothing was written"):
        run_import(db, url)
    count = sa.select(sa.func.count()).select_from(t.resource_providers)
    assert db.read(lambda c: c.scalar(count)) == 0
    with pytest.raises(transfer.TransferError, match="source must be"):
        run_import(db, "sqlite://")
    with pytest.raises(transfer.TransferError, match="cannot read the upstream database"):
        run_import(db, "sqlite:///%s" % (tmp_path / "missing.sqlite"))
    assert not (tmp_path / "missing.sqlite").exists()


def test_a_custom_trait_alone_makes_the_target_non_empty(db, client, tmp_path):
    assert client.put("/traits/CUSTOM_MINE").status_code == 201
    with pytest.raises(transfer.TransferError, match=r"\(1 custom traits\)"):
        run_import(db, make_source(tmp_path / "up.sqlite"))


def test_non_empty_target_needs_replace(db, client, tmp_path):
    assert client.post("/resource_providers", json={"name": "already"}).status_code in (200, 201)
    url = make_source(tmp_path / "up.sqlite")
    with pytest.raises(transfer.TransferError, match="not empty .*1 providers.*--replace"):
        run_import(db, url)

    def names() -> list[str]:
        listing = client.get("/resource_providers").json()["resource_providers"]
        return sorted(p["name"] for p in listing)

    assert names() == ["already"]
    assert run_import(db, url, replace=True).ok
    assert names() == ["cn1", "cn1_numa0", "disk", "lone"]


def test_export_writes_upstreams_head(db, client, tmp_path):
    run_import(db, make_source(tmp_path / "up.sqlite"))
    # Changes made while Berth ran go back too.
    gen = client.get("/allocations/%s" % C1).json()["consumer_generation"]
    body = {
        "allocations": {CHILD: {"resources": {"VCPU": 1}}},
        "project_id": "proj-b",
        "user_id": "user-b",
        "consumer_generation": None,
        "consumer_type": "MIGRATION",
    }
    C3 = "c0000003-0000-0000-0000-000000000000"
    assert client.put("/allocations/%s" % C3, json=body).status_code == 204
    out = tmp_path / "back.sqlite"
    report = transfer.export_database(db, "sqlite:///%s" % out)
    assert report.ok and report.revision == upstream.HEAD
    engine = sa.create_engine("sqlite:///%s" % out)
    with engine.connect() as conn:
        assert conn.scalar(sa.text("SELECT version_num FROM alembic_version")) == upstream.HEAD
        ids = dict(conn.execute(sa.text("SELECT name, id FROM resource_classes")).all())
        assert ids["VCPU"] == VCPU and ids["CUSTOM_FPGA"] == 10000
        assert (
            conn.scalar(sa.text("SELECT generation FROM consumers WHERE uuid = :u"), {"u": C1})
            == gen
        )
        assert conn.scalar(sa.text("SELECT COUNT(*) FROM allocations")) == 5
        assert (
            conn.scalar(
                sa.text(
                    "SELECT ct.name FROM consumers c JOIN consumer_types ct ON "
                    "c.consumer_type_id = ct.id WHERE c.uuid = :u"
                ),
                {"u": C3},
            )
            == "MIGRATION"
        )
    engine.dispose()
    with pytest.raises(transfer.TransferError, match="must be an empty database"):
        transfer.export_database(db, "sqlite:///%s" % out)
    assert transfer.verify_database(db, "sqlite:///%s" % out, incomplete_ids=(NIL, NIL)).ok


def test_commands_report(tmp_path):
    """The commands as an operator runs them: JSON report, exit codes."""
    url = make_source(tmp_path / "up.sqlite")
    conf = tmp_path / "placement.conf"
    conf.write_text("[placement_database]\nconnection = sqlite:///%s\n" % (tmp_path / "b.sqlite"))
    berth = [sys.executable, "-m", "berth.cli", "db"]
    res = subprocess.run(
        [*berth, "import", "--config-file", str(conf), "--from", url, "--json"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["ok"] and report["tables"]["allocations"]["target"] == 4
    assert all(c["ok"] for c in report["checks"].values())
    res = subprocess.run(
        [*berth, "import", "--config-file", str(conf), "--from", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 1 and "--replace" in res.stderr and "Traceback" not in res.stderr
    verify = [*berth, "verify", "--config-file", str(conf), "--against", url]
    res = subprocess.run(verify, capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and "DIFFERS" not in res.stdout, res.stdout + res.stderr
    engine = sa.create_engine(url)
    with engine.begin() as conn:  # upstream moves on: verify sees it
        conn.exec_driver_sql("UPDATE consumers SET generation = 9")
    engine.dispose()
    res = subprocess.run(verify, capture_output=True, text=True, timeout=120)
    assert res.returncode == 1 and "DIFFERS" in res.stdout
    assert "source (9, 'proj-a'" in res.stdout
    res = subprocess.run(
        [
            *berth,
            "export",
            "--config-file",
            str(conf),
            "--to",
            "sqlite:///%s" % (tmp_path / "back.sqlite"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    assert "usage per provider and class" in res.stdout and "DIFFERS" not in res.stdout
