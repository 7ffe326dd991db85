"""Copying a whole Placement database between upstream's schema and Berth's.

``import_database`` reads an upstream Placement database (any revision in
``upstream.REVISIONS``) in one read-only snapshot and writes it into a Berth
database in one transaction; ``export_database`` does the reverse into an
empty database, creating upstream's tables at the 16.0.0 head. Both end
with a verification pass (``transfer_report.verify``: ``dump.compare``)
run inside the writing transaction, so a copy that does not verify is
rolled back and leaves the target as it was.

Row ids are kept, except those of resource classes and traits: Berth seeds
its standard ones itself and upstream numbers standard classes by their
place in ``os_resource_classes``, so these are matched by name.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine

from berth.db import changes, dump, events, upstream
from berth.db import tables as t
from berth.db.dump import Dump, Row
from berth.db.engine import Database, create_engine
from berth.db.transfer_report import Report, verify

#: Called after each table is written: (table, rows, seconds).
Progress = Callable[[str, int, float], None]
#: Rows per INSERT batch.
CHUNK = 5000


class TransferError(Exception):
    """The copy cannot be made; nothing was written."""


def source_engine(url: str) -> Engine:
    """An engine that only reads: SQLite files open read-only, other
    databases in a read-only repeatable-read transaction."""
    parsed = sa.engine.make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if not parsed.database or parsed.database == ":memory:":
            raise TransferError("the source must be a database file or server")
        return sa.create_engine("sqlite:///file:%s?mode=ro&uri=true" % parsed.database)
    return create_engine(url, pool_size=1, max_overflow=0).execution_options(
        isolation_level="REPEATABLE READ", postgresql_readonly=True
    )


def read_upstream(url: str) -> tuple[str, Dump]:
    """The revision and every row of the upstream database at ``url``, in
    one read-only snapshot.

    Raises TransferError when it cannot be opened, upstream.UnsupportedSchema
    when it is not at one of upstream's revisions.
    """
    engine = source_engine(url)
    try:
        with engine.connect() as conn, conn.begin():
            revision = upstream.detect_revision(conn)
            return revision, dump.read(conn, consumer_types=upstream.has_consumer_types(revision))
    except sa.exc.OperationalError as exc:
        raise TransferError(
            "cannot read the upstream database: %s" % str(exc.orig).strip().splitlines()[0]
        ) from None
    finally:
        engine.dispose()


# -- import ---------------------------------------------------------------


def import_database(
    source_url: str,
    target: Database,
    *,
    replace: bool = False,
    incomplete_ids: tuple[str, str],
    progress: Progress | None = None,
) -> Report:
    """Copy the upstream database at ``source_url`` into ``target`` (a
    migrated Berth database) and verify it.

    ``incomplete_ids`` are the project and user given to consumers that an
    old upstream database lacks (as upstream's own online migration does).
    Raises TransferError (nothing written) when the source is not upstream's,
    the target holds data and ``replace`` is false, or the copy does not
    verify; upstream.UnsupportedSchema for an unknown revision.
    """
    clock: dict[str, float] = {}
    started = time.monotonic()
    revision, source = read_upstream(source_url)
    raw = {name: source.count(name) for name in dump.TABLES}
    _complete(source, incomplete_ids)
    clock["read"] = time.monotonic() - started
    if progress:
        progress("(read from the source)", sum(raw.values()), clock["read"])
    report = Report("import", revision)

    def copy(conn: Connection) -> None:
        began = time.monotonic()
        _make_room(conn, replace)
        _write_berth(conn, source, progress)
        changes.note(conn, changes.STRUCTURE)
        events.resync(conn)
        clock["write"] = time.monotonic() - began
        verify(conn, source, raw, report, clock, consumer_types=True)
        if not report.ok:
            raise TransferError(
                "the copy did not verify (%s); nothing was written" % " | ".join(report.failures())
            )

    try:
        target.run(copy)
    except sa.exc.IntegrityError as exc:
        raise TransferError(
            "the source breaks a rule Berth's schema keeps (%s); nothing was "
            "written" % str(exc.orig).strip().splitlines()[0]
        ) from None
    finally:
        report.seconds = clock
    return report


def _make_room(conn: Connection, replace: bool) -> None:
    custom = {
        tb: tb.c.name.like("CUSTOM\\_%", escape="\\") for tb in (t.resource_classes, t.traits)
    }

    def count(table: sa.Table) -> int:
        query = sa.select(sa.func.count()).select_from(table)
        if table in custom:
            query = query.where(custom[table])
        return int(conn.scalar(query) or 0)

    held = {
        what: count(table)
        for what, table in (
            ("providers", t.resource_providers),
            ("consumers", t.consumers),
            ("projects", t.projects),
            ("users", t.users),
            ("aggregates", t.placement_aggregates),
            ("consumer types", t.consumer_types),
            ("custom resource classes", t.resource_classes),
            ("custom traits", t.traits),
        )
    }
    if not any(held.values()):
        return
    if not replace:
        raise TransferError(
            "the Berth database is not empty (%s); pass --replace to "
            "overwrite it" % ", ".join("%d %s" % (n, what) for what, n in held.items() if n)
        )
    for table in (
        t.allocations,
        t.consumers,
        t.resource_provider_traits,
        t.resource_provider_aggregates,
        t.placement_aggregates,
        t.inventories,
        t.consumer_types,
        t.projects,
        t.users,
    ):
        conn.execute(table.delete())
    conn.execute(
        t.resource_providers.update().values(root_provider_id=None, parent_provider_id=None)
    )
    conn.execute(t.resource_providers.delete())
    for table, where in custom.items():
        conn.execute(table.delete().where(where))


def _complete(source: Dump, incomplete_ids: tuple[str, str]) -> None:
    """Fill in what databases older than ``upstream.COMPLETE_FROM`` may
    lack, as upstream's online migrations would: a root for every
    provider, a consumer record for every allocation, and standard
    classes that were referenced but never stored."""
    rows = source.rows
    by_id = {r["id"]: r for r in rows["resource_providers"]}
    for row in rows["resource_providers"]:
        if row["name"] is None:
            raise TransferError("provider %s has no name; Berth needs one" % row["uuid"])
        row["generation"] = row["generation"] or 0
        top = row
        while top["parent_provider_id"] is not None:
            top = by_id[top["parent_provider_id"]]
        row["root_provider_id"] = top["id"]
    if any(r["uuid"] is None for r in rows["placement_aggregates"]):
        raise TransferError("the source has aggregates without a uuid")
    used = {r["resource_class_id"] for r in rows["inventories"]}
    used |= {r["resource_class_id"] for r in rows["allocations"]}
    for class_id in sorted(used - set(source.classes)):
        name = upstream.standard_class_name(class_id)
        if name is None:
            raise TransferError("resource class id %d is used but not defined" % class_id)
        source.classes[class_id] = {
            "id": class_id,
            "name": name,
            "created_at": None,
            "updated_at": None,
        }
        source.added["resource_classes"] = source.added.get("resource_classes", 0) + 1
    have = {r["uuid"] for r in rows["consumers"]}
    missing = sorted({r["consumer_id"] for r in rows["allocations"]} - have)
    if missing:
        project = _owner(source, "projects", incomplete_ids[0])
        user = _owner(source, "users", incomplete_ids[1])
        next_id = max((r["id"] for r in rows["consumers"]), default=0) + 1
        rows["consumers"] += [
            {
                "id": next_id + i,
                "uuid": uuid,
                "project_id": project,
                "user_id": user,
                "generation": 0,
                "consumer_type_id": None,
                "created_at": None,
                "updated_at": None,
            }
            for i, uuid in enumerate(missing)
        ]
        source.added["consumers"] = len(missing)


def _parents_first(source: Dump) -> None:
    """Order providers so that each comes after its parent (the foreign
    keys are checked row by row on MySQL)."""
    rows = source.rows["resource_providers"]
    by_id = {r["id"]: r for r in rows}

    def depth(row: Row) -> int:
        n = 0
        while row["parent_provider_id"] is not None:
            row = by_id[row["parent_provider_id"]]
            n += 1
        return n

    rows.sort(key=depth)


def _owner(source: Dump, table: str, external_id: str) -> int:
    rows = source.rows[table]
    for row in rows:
        if row["external_id"] == external_id:
            return int(row["id"])
    new_id = max((r["id"] for r in rows), default=0) + 1
    rows.append({"id": new_id, "external_id": external_id, "created_at": None, "updated_at": None})
    source.added[table] = source.added.get(table, 0) + 1
    return new_id


def _by_name(conn: Connection, table: sa.Table, wanted: dict[int, Row]) -> dict[int, int]:
    """Source id -> target id for classes or traits, adding the names the
    target lacks."""

    def ids() -> dict[str, int]:
        return {row.name: row.id for row in conn.execute(sa.select(table.c.name, table.c.id))}

    have = ids()
    missing = [r for r in wanted.values() if r["name"] not in have]
    if missing:
        conn.execute(
            table.insert(),
            [
                {"name": r["name"], "created_at": r["created_at"], "updated_at": r["updated_at"]}
                for r in missing
            ],
        )
        have = ids()
    return {source_id: have[r["name"]] for source_id, r in wanted.items()}


def _write_berth(conn: Connection, source: Dump, progress: Progress | None) -> None:
    began = time.monotonic()
    class_ids = _by_name(conn, t.resource_classes, source.classes)
    trait_ids = _by_name(conn, t.traits, source.traits)
    if progress:
        progress(
            "resource_classes + traits", len(class_ids) + len(trait_ids), time.monotonic() - began
        )
    _write_rows(conn, t.metadata, source, class_ids, trait_ids, progress)


def _write_rows(
    conn: Connection,
    metadata: sa.MetaData,
    source: Dump,
    class_ids: dict[int, int],
    trait_ids: dict[int, int],
    progress: Progress | None,
) -> None:
    _parents_first(source)
    for name in dump.COLUMNS:
        began = time.monotonic()
        rows = source.rows[name]
        if name in ("inventories", "allocations"):
            rows = [{**r, "resource_class_id": class_ids[r["resource_class_id"]]} for r in rows]
        elif name == "resource_provider_traits":
            rows = [{**r, "trait_id": trait_ids[r["trait_id"]]} for r in rows]
        table = metadata.tables[name]
        for i in range(0, len(rows), CHUNK):
            conn.execute(table.insert(), rows[i : i + CHUNK])
        if "id" in table.c:
            _reset_sequence(conn, name)
        if progress:
            progress(name, len(rows), time.monotonic() - began)


def _reset_sequence(conn: Connection, table: str) -> None:
    """Rows were written with explicit ids: move PostgreSQL's sequence past
    them (MySQL and SQLite do so by themselves)."""
    if conn.dialect.name != "postgresql":
        return
    conn.execute(
        sa.text(
            "SELECT setval(pg_get_serial_sequence(:t, 'id'), "
            "COALESCE(MAX(id), 0) + 1, false) FROM %s" % table
        ),
        {"t": table},
    )


# -- verify ---------------------------------------------------------------


def verify_database(berth: Database, other_url: str, *, incomplete_ids: tuple[str, str]) -> Report:
    """Compare Berth's database with the upstream one at ``other_url``
    (read only), as the copy's own verification does, but between two
    committed databases: before switching over, or after an export.

    Raises upstream.UnsupportedSchema when ``other_url`` is not upstream's.
    """
    clock: dict[str, float] = {}
    began = time.monotonic()
    revision, other = read_upstream(other_url)
    report = Report("verify", revision)
    raw = {name: other.count(name) for name in dump.TABLES}
    # An old upstream database compares as the import completed it.
    _complete(other, incomplete_ids)
    clock["read"] = time.monotonic() - began
    berth.read(lambda conn: verify(conn, other, raw, report, clock, consumer_types=True))
    report.seconds = clock
    return report


# -- export ---------------------------------------------------------------


def export_database(
    source: Database, target_url: str, *, progress: Progress | None = None
) -> Report:
    """Write Berth's database into the empty database at ``target_url`` as
    upstream's schema at the 16.0.0 head, and verify it.

    Raises TransferError when the target already has tables or the copy
    does not verify; on any failure the tables made are dropped again.
    """
    clock: dict[str, float] = {}
    began = time.monotonic()
    berth = source.read(dump.read)
    raw = {name: berth.count(name) for name in dump.TABLES}
    clock["read"] = time.monotonic() - began
    report = Report("export", upstream.HEAD)
    engine = create_engine(
        target_url, pool_size=1, max_overflow=0, mysql_sql_mode="TRADITIONAL,NO_AUTO_VALUE_ON_ZERO"
    )
    metadata = upstream.head_metadata()
    try:
        with engine.connect() as conn:
            present = sa.inspect(conn).get_table_names()
        if present:
            raise TransferError(
                "the export target must be an empty database; it has tables "
                "(%s)" % ", ".join(sorted(present)[:5])
            )
        metadata.create_all(engine)
        try:
            with engine.connect() as conn, conn.begin():
                began = time.monotonic()
                _write_upstream(conn, metadata, berth, progress)
                clock["write"] = time.monotonic() - began
                verify(conn, berth, raw, report, clock, consumer_types=True)
                if not report.ok:
                    raise TransferError(
                        "the export did not verify (%s)" % " | ".join(report.failures())
                    )
        except BaseException:
            metadata.drop_all(engine)
            raise
    finally:
        report.seconds = clock
        engine.dispose()
    return report


def _write_upstream(
    conn: Connection, metadata: sa.MetaData, berth: Dump, progress: Progress | None
) -> None:
    began = time.monotonic()
    next_custom = upstream.CUSTOM_CLASS_ID_MIN
    class_ids: dict[int, int] = {}
    for berth_id, row in sorted(berth.classes.items()):
        std = upstream.standard_class_id(row["name"])
        if std is None:
            std, next_custom = next_custom, next_custom + 1
        class_ids[berth_id] = std
    conn.execute(
        metadata.tables["resource_classes"].insert(),
        [{**row, "id": class_ids[i]} for i, row in berth.classes.items()],
    )
    conn.execute(metadata.tables["traits"].insert(), list(berth.traits.values()))
    for name in ("resource_classes", "traits"):
        _reset_sequence(conn, name)
    conn.execute(metadata.tables["alembic_version"].insert().values(version_num=upstream.HEAD))
    if progress:
        progress(
            "resource_classes + traits",
            len(berth.classes) + len(berth.traits),
            time.monotonic() - began,
        )
    _write_rows(conn, metadata, berth, class_ids, {i: i for i in berth.traits}, progress)
