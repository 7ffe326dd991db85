"""Write the benchmark plan (``world.plan``) straight into Berth's tables.

The HTTP builder needs one request per provider, inventory, trait set,
aggregate set and allocation (about 30 minutes for 10,000 hosts); this
writes the same rows in one transaction with set-based inserts: 10,000
hosts with 100,000 allocations in seconds. The result is what the API
would have built, generations included (each provider's generation counts
the writes the API would have made to it: its inventory, traits and
aggregates, and each allocation against it; each consumer is at 1), which
``tests/functional/test_bench_bulk.py`` checks by comparing every read
endpoint's answers with a world built through the API.

    .venv/bin/python bench/bulk.py --hosts 10000 --allocations 100000 \\
        --url sqlite:////tmp/w10k.sqlite

The target must hold no providers yet; it is migrated first if empty.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

sys.path.insert(0, str(Path(__file__).resolve().parent))
import world as world_mod  # noqa: E402

from berth.db import changes, setup  # noqa: E402
from berth.db import tables as t  # noqa: E402
from berth.db.engine import Database, create_engine  # noqa: E402
from berth.domain import capacity, common  # noqa: E402

#: Rows per INSERT statement batch.
CHUNK = 5000
#: Tables given explicit ids here, whose id sequences PostgreSQL must be
#: told about afterwards.
EXPLICIT_IDS = (t.resource_providers, t.placement_aggregates, t.projects, t.users, t.consumers)


def _chunks(rows: list[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    for start in range(0, len(rows), CHUNK):
        yield rows[start : start + CHUNK]


def _insert(conn: Connection, table: sa.Table, rows: list[dict[str, Any]]) -> None:
    """Plain DB-API ``executemany`` in chunks: SQLAlchemy's per-row
    parameter processing would cost more than the database's work."""
    if not rows:
        return
    columns = list(rows[0])
    compiled = (
        table.insert().values({c: sa.bindparam(c) for c in columns}).compile(dialect=conn.dialect)
    )
    order = compiled.positiontup
    cursor = conn.connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        for chunk in _chunks(rows):
            if order is None:
                cursor.executemany(compiled.string, chunk)
            else:
                cursor.executemany(compiled.string, [tuple(r[c] for c in order) for r in chunk])
    finally:
        cursor.close()


def _ids_from(conn: Connection, table: sa.Table) -> int:
    return int(conn.scalar(sa.select(sa.func.coalesce(sa.func.max(table.c.id), 0)))) + 1


def _named(conn: Connection, table: sa.Table, names: Iterable[str]) -> dict[str, int]:
    """Ids of ``names`` in a name table, creating the missing ones."""
    wanted = set(names)
    found = common.ids_by_name(conn, table, wanted)
    missing = sorted(wanted - set(found))
    if missing:
        stamp = common.now()
        conn.execute(table.insert(), [{"name": n, "created_at": stamp} for n in missing])
        found.update(common.ids_by_name(conn, table, missing))
    return found


def write(conn: Connection, world: world_mod.World) -> dict[str, int]:
    """Insert ``world`` into an empty Berth database; row counts written."""
    if conn.scalar(sa.select(sa.func.count()).select_from(t.resource_providers)):
        raise SystemExit("the target already holds providers")
    stamp = common.now()
    classes = _named(conn, t.resource_classes, {rc for p in world.providers for rc in p.inventory})
    traits = _named(conn, t.traits, {n for p in world.providers for n in p.traits})

    # Generations: one bump per write the API would have made.
    gens: Counter[str] = Counter()
    for p in world.providers:
        gens[p.uuid] += bool(p.inventory) + bool(p.traits) + bool(p.aggregates)
    for a in world.allocations:
        gens[a.provider] += 1

    next_rp = _ids_from(conn, t.resource_providers)
    ids: dict[str, int] = {}
    roots: dict[str, int] = {}
    rp_rows, inv_rows, trait_rows, agg_links = [], [], [], []
    agg_ids: dict[str, int] = {}
    next_agg = _ids_from(conn, t.placement_aggregates)
    for p in world.providers:
        pid = ids[p.uuid] = next_rp
        next_rp += 1
        parent = ids[p.parent] if p.parent else None
        roots[p.uuid] = roots[p.parent] if p.parent else pid
        rp_rows.append(
            {
                "id": pid,
                "uuid": p.uuid,
                "name": p.name,
                "generation": gens[p.uuid],
                "parent_provider_id": parent,
                "root_provider_id": roots[p.uuid],
                "created_at": stamp,
                "updated_at": stamp,
            }
        )
        for rc, fields in p.inventory.items():
            inv = capacity.Inventory(**fields)._asdict()  # API defaults
            inv_rows.append(
                {
                    **inv,
                    "total": int(inv["total"]),
                    "allocation_ratio": float(inv["allocation_ratio"]),
                    "resource_provider_id": pid,
                    "resource_class_id": classes[rc],
                    "created_at": stamp,
                }
            )
        trait_rows += [
            {"resource_provider_id": pid, "trait_id": traits[n], "created_at": stamp}
            for n in p.traits
        ]
        for agg in p.aggregates:
            if agg not in agg_ids:
                agg_ids[agg] = next_agg
                next_agg += 1
            agg_links.append(
                {"resource_provider_id": pid, "aggregate_id": agg_ids[agg], "created_at": stamp}
            )

    # Children name their parents by id: roots first, in plan order.
    _insert(conn, t.resource_providers, rp_rows)
    _insert(conn, t.inventories, inv_rows)
    _insert(conn, t.resource_provider_traits, trait_rows)
    _insert(
        conn,
        t.placement_aggregates,
        [{"id": i, "uuid": u, "created_at": stamp} for u, i in agg_ids.items()],
    )
    _insert(conn, t.resource_provider_aggregates, agg_links)

    people: dict[sa.Table, dict[str, int]] = {t.projects: {}, t.users: {}}
    for table, attr in ((t.projects, "project"), (t.users, "user")):
        start = _ids_from(conn, table)
        for a in world.allocations:
            ref = getattr(a, attr)
            if ref not in people[table]:
                people[table][ref] = start + len(people[table])
        _insert(
            conn,
            table,
            [{"id": i, "external_id": e, "created_at": stamp} for e, i in people[table].items()],
        )
    next_consumer = _ids_from(conn, t.consumers)
    consumer_rows, alloc_rows = [], []
    for n, a in enumerate(world.allocations):
        consumer_rows.append(
            {
                "id": next_consumer + n,
                "uuid": a.consumer,
                "project_id": people[t.projects][a.project],
                "user_id": people[t.users][a.user],
                "generation": 1,
                "consumer_type_id": None,
                "created_at": stamp,
                "updated_at": stamp,
            }
        )
        alloc_rows += [
            {
                "resource_provider_id": ids[a.provider],
                "consumer_id": a.consumer,
                "resource_class_id": classes[rc],
                "used": used,
                "created_at": stamp,
            }
            for rc, used in a.resources.items()
        ]
    _insert(conn, t.consumers, consumer_rows)
    _insert(conn, t.allocations, alloc_rows)
    _fix_sequences(conn)
    # Every worker's candidate cache must reload whole.
    changes.note(conn, changes.STRUCTURE)
    return {
        "resource_providers": len(rp_rows),
        "inventories": len(inv_rows),
        "traits": len(trait_rows),
        "aggregates": len(agg_links),
        "consumers": len(consumer_rows),
        "allocations": len(alloc_rows),
    }


def _fix_sequences(conn: Connection) -> None:
    """PostgreSQL's id sequences do not see explicit ids: move them past
    the largest (MySQL and SQLite follow explicit ids by themselves)."""
    if conn.dialect.name != "postgresql":
        return
    for table in EXPLICIT_IDS:
        conn.execute(
            sa.text(
                "SELECT setval(pg_get_serial_sequence(:t, 'id'), "
                "(SELECT COALESCE(MAX(id), 1) FROM %s))" % table.name
            ),
            {"t": table.name},
        )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--url", required=True, help="target database URL")
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--allocations", type=int, help="existing allocations (default: two per host)")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--shape",
        choices=world_mod.SHAPES,
        default="default",
        help="devices: 20 children a host (NUMA cells, PFs, vGPUs, bandwidth, PCI devices)",
    )
    args = ap.parse_args()
    engine = create_engine(args.url)
    setup.prepare(engine)
    start = time.perf_counter()
    world = world_mod.plan(args.hosts, args.seed, args.allocations, args.shape)
    counts = Database(engine).run(lambda conn: write(conn, world))
    print(
        "wrote %s in %.1fs"
        % (", ".join("%d %s" % (v, k) for k, v in counts.items()), time.perf_counter() - start)
    )
    engine.dispose()
    return 0


if __name__ == "__main__":
    sys.exit(main())
