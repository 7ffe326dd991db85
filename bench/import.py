"""Time ``berth db import`` (copy and verify) of a large upstream database.

Builds an upstream-schema SQLite database at the 16.0.0 head with bulk
inserts (10,000 hosts and 100,000 allocations by default: three classes
per host, one consumer per three allocations), imports it into a fresh
Berth SQLite database through the real command, exports it back, and
prints the timings.

    .venv/bin/python bench/import.py [--hosts N] [--allocations M] [--target URL]
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import os_resource_classes
import os_traits
import sqlalchemy as sa

from berth.db import upstream

ROOT = Path(__file__).resolve().parent.parent
BERTH = ROOT / ".venv" / "bin" / "berth"
CLASSES = ("VCPU", "MEMORY_MB", "DISK_GB")


def build(url: str, hosts: int, allocations: int, seed: int = 1) -> None:
    """An upstream database with ``hosts`` compute nodes and about
    ``allocations`` allocations."""
    rnd = random.Random(seed)
    engine = sa.create_engine(url)
    md = upstream.head_metadata()
    md.create_all(engine)
    tb = md.tables
    std = list(os_resource_classes.STANDARDS)
    with engine.begin() as conn:
        conn.execute(tb["alembic_version"].insert().values(version_num=upstream.HEAD))
        conn.execute(
            tb["resource_classes"].insert(), [{"id": i, "name": n} for i, n in enumerate(std)]
        )
        traits = list(os_traits.get_traits())[:200]
        conn.execute(
            tb["traits"].insert(), [{"id": i + 1, "name": n} for i, n in enumerate(traits)]
        )
        conn.execute(
            tb["projects"].insert(),
            [{"id": i, "external_id": uuid.UUID(int=i).hex} for i in range(1, 51)],
        )
        conn.execute(
            tb["users"].insert(),
            [{"id": i, "external_id": uuid.UUID(int=1000 + i).hex} for i in range(1, 101)],
        )
        conn.execute(
            tb["placement_aggregates"].insert(),
            [{"id": i, "uuid": str(uuid.UUID(int=5000 + i))} for i in range(1, 101)],
        )
        conn.execute(
            tb["resource_providers"].insert(),
            [
                {
                    "id": i,
                    "uuid": str(uuid.UUID(int=10**6 + i)),
                    "name": "host%05d" % i,
                    "generation": 1,
                    "root_provider_id": i,
                    "parent_provider_id": None,
                }
                for i in range(1, hosts + 1)
            ],
        )
        totals = {"VCPU": 64, "MEMORY_MB": 262144, "DISK_GB": 4000}
        conn.execute(
            tb["inventories"].insert(),
            [
                {
                    "resource_provider_id": h,
                    "resource_class_id": std.index(c),
                    "total": totals[c],
                    "reserved": 0,
                    "min_unit": 1,
                    "max_unit": totals[c],
                    "step_size": 1,
                    "allocation_ratio": 1.0,
                }
                for h in range(1, hosts + 1)
                for c in CLASSES
            ],
        )
        conn.execute(
            tb["resource_provider_traits"].insert(),
            [
                {"resource_provider_id": h, "trait_id": rnd.randrange(1, 201)}
                for h in range(1, hosts + 1)
            ],
        )
        conn.execute(
            tb["resource_provider_aggregates"].insert(),
            [{"resource_provider_id": h, "aggregate_id": 1 + h % 100} for h in range(1, hosts + 1)],
        )
        consumers = allocations // len(CLASSES)
        conn.execute(
            tb["consumers"].insert(),
            [
                {
                    "id": c,
                    "uuid": str(uuid.UUID(int=10**8 + c)),
                    "project_id": rnd.randrange(1, 51),
                    "user_id": rnd.randrange(1, 101),
                    "generation": 1 + c % 3,
                }
                for c in range(1, consumers + 1)
            ],
        )
        conn.execute(
            tb["allocations"].insert(),
            [
                {
                    "resource_provider_id": 1 + c % hosts,
                    "consumer_id": str(uuid.UUID(int=10**8 + c)),
                    "resource_class_id": std.index(cls),
                    "used": 1,
                }
                for c in range(1, consumers + 1)
                for cls in CLASSES
            ],
        )
    engine.dispose()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=10000)
    ap.add_argument("--allocations", type=int, default=100000)
    ap.add_argument("--target", help="an empty database for Berth (default: a new SQLite file)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="berth-import-bench-") as tmp:
        source = "sqlite:///%s/upstream.sqlite" % tmp
        began = time.monotonic()
        build(source, args.hosts, args.allocations)
        print("built upstream database in %.1fs" % (time.monotonic() - began))
        conf = Path(tmp) / "placement.conf"
        target = args.target or "sqlite:///%s/berth.sqlite" % tmp
        conf.write_text("[placement_database]\nconnection = %s\n" % target)
        began = time.monotonic()
        out = subprocess.run(
            [str(BERTH), "db", "import", "--config-file", str(conf), "--from", source, "--json"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        took = time.monotonic() - began
        report = json.loads(out)
        print(
            "import + verify: %.1fs wall (command), phases %s, verified %s"
            % (took, report["seconds"], report["ok"])
        )
        print(
            "  rows: "
            + ", ".join("%s %d" % (table, c["target"]) for table, c in report["tables"].items())
        )
        began = time.monotonic()
        out = subprocess.run(
            [
                str(BERTH),
                "db",
                "export",
                "--config-file",
                str(conf),
                "--to",
                "sqlite:///%s/back.sqlite" % tmp,
                "--json",
            ],
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        print(
            "export + verify: %.1fs wall, phases %s, verified %s"
            % (time.monotonic() - began, json.loads(out)["seconds"], json.loads(out)["ok"])
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
