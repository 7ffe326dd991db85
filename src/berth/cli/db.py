"""``berth db``: ``sync`` and ``version`` (migrations), ``mark-restored``
(after a backup was restored, docs/install.md), and ``import``, ``export``
and ``verify``, the command-line side of ``berth.db.transfer`` (progress
on a terminal, a summary or a JSON report).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from berth import conf as berth_conf
from berth.cli import common

if TYPE_CHECKING:
    from berth.db import transfer
    from berth.db.engine import Database
    from berth.db.transfer_report import Report


def register(sub: common.Subparsers) -> None:
    group = common.add_group(sub, "db", "database migrations")
    common.add_command(
        group, "sync", "apply every migration and seed standard classes and traits", cmd_db_sync
    )
    common.add_command(
        group, "version", "show the current and the newest migration", cmd_db_version
    )
    imp = common.add_command(
        group, "import", "copy an upstream Placement database into this one, and verify", cmd_import
    )
    imp.add_argument(
        "--from",
        dest="source",
        required=True,
        metavar="URL",
        help="upstream's database (only read)",
    )
    imp.add_argument(
        "--replace", action="store_true", help="overwrite a Berth database that holds data"
    )
    imp.add_argument("--json", action="store_true", help="print the report as JSON (no progress)")
    exp = common.add_command(
        group,
        "export",
        "write this database into an empty one in upstream's schema (16.0.0 head), and verify",
        cmd_export,
    )
    exp.add_argument("--to", dest="target", required=True, metavar="URL", help="an empty database")
    exp.add_argument("--json", action="store_true", help="print the report as JSON (no progress)")
    common.add_command(
        group,
        "mark-restored",
        "after restoring a backup: "
        "move the change sequence "
        "past the lost history, so "
        "that every server's cache "
        "reloads and every feed "
        "reader lists again",
        cmd_mark_restored,
    )
    ver = common.add_command(
        group,
        "verify",
        "compare this database with an "
        "upstream one, as import and "
        "export do; exit 1 if they "
        "differ",
        cmd_verify,
    )
    ver.add_argument(
        "--against",
        dest="other",
        required=True,
        metavar="URL",
        help="upstream's database (only read)",
    )
    ver.add_argument("--json", action="store_true", help="print the report as JSON")


def cmd_db_sync(args: argparse.Namespace) -> int:
    from berth.db import migrate, setup, urls

    conf = common.load_conf(args)
    engine = setup.engine_from_conf(conf)
    print("database: %s" % urls.masked(berth_conf.database_url(conf)))
    setup.prepare(engine)
    print("database at revision %s" % migrate.current_revision(engine))
    return 0


def cmd_db_version(args: argparse.Namespace) -> int:
    from berth.db import migrate, setup, urls

    conf = common.readable_conf(args)
    engine = setup.engine_to_read(conf)
    # As configured (and as `db sync` names it), password masked.
    print("database: %s" % urls.masked(berth_conf.database_url(conf)))
    current = migrate.current_revision(engine)
    engine.dispose()
    print("current: %s\nhead: %s" % (current or "none (empty database)", migrate.head_revision()))
    return 0


def cmd_mark_restored(args: argparse.Namespace) -> int:
    """Move the change sequence past what a restore lost
    (``changes.skip_past_restore``); print the new position."""
    from berth.db import changes, setup, urls

    conf = common.load_conf(args)
    engine = setup.engine_from_conf(conf)
    print("database: %s" % urls.masked(berth_conf.database_url(conf)))
    with engine.begin() as conn:
        now = changes.skip_past_restore(conn)
    engine.dispose()
    print(
        "change sequence moved on to %s: every server's candidate cache "
        "reloads at its next request, every change-feed reader lists "
        "again" % now
    )
    return 0


def _progress(args: argparse.Namespace) -> transfer.Progress | None:
    if args.json or not sys.stderr.isatty():
        return None

    def show(table: str, rows: int, seconds: float) -> None:
        print("  %-30s %9d rows  %6.2fs" % (table, rows, seconds), file=sys.stderr, flush=True)

    return show


def _finish(args: argparse.Namespace, report: Report) -> int:
    if args.json:
        print(json.dumps(report.as_dict(), indent=2, sort_keys=True))
        return 0 if report.ok else 1
    print("%s: upstream revision %s" % (report.direction, report.revision))
    print("  %-30s %9s %7s %9s" % ("table", "source", "added", "target"))
    for c in report.tables:
        print(
            "  %-30s %9d %7d %9d  %s"
            % (c.table, c.source, c.added, c.target, "ok" if c.ok else "DIFFERS")
        )
    print("verification:")
    for name, diffs in report.checks.items():
        print("  %-58s %s" % (name, "identical" if not diffs else "DIFFERS"))
        for line in diffs:
            print("      " + line)
    print(
        "took %.1fs (%s)"
        % (
            sum(report.seconds.values()),
            ", ".join("%s %.1fs" % kv for kv in report.seconds.items()),
        )
    )
    return 0 if report.ok else 1


def _run(
    args: argparse.Namespace,
    work: Callable[[Any, Database], Report],
    prepare: bool = False,
) -> int:
    """Run ``work(conf, db)`` on the configured database (migrated and
    seeded first with ``prepare``) and report; a transfer that cannot
    start is one error line."""
    from berth.db import setup, transfer, upstream
    from berth.db.engine import Database

    # Without prepare (verify, export) it only reads: no database made.
    conf = common.load_conf(args) if prepare else common.readable_conf(args)
    engine = setup.engine_from_conf(conf)
    if prepare:
        setup.prepare(engine)
    try:
        report = work(conf, Database(engine))
    except (transfer.TransferError, upstream.UnsupportedSchema) as exc:
        raise SystemExit("berth: error: %s" % exc) from None
    finally:
        engine.dispose()
    return _finish(args, report)


def _incomplete_ids(conf: Any) -> tuple[str, str]:
    return (
        conf.placement.incomplete_consumer_project_id,
        conf.placement.incomplete_consumer_user_id,
    )


def cmd_import(args: argparse.Namespace) -> int:
    from berth.db import transfer

    return _run(
        args,
        lambda conf, db: transfer.import_database(
            args.source,
            db,
            replace=args.replace,
            incomplete_ids=_incomplete_ids(conf),
            progress=_progress(args),
        ),
        prepare=True,
    )


def cmd_verify(args: argparse.Namespace) -> int:
    from berth.db import transfer

    return _run(
        args,
        lambda conf, db: transfer.verify_database(
            db, args.other, incomplete_ids=_incomplete_ids(conf)
        ),
    )


def cmd_export(args: argparse.Namespace) -> int:
    from berth.db import transfer

    return _run(
        args, lambda conf, db: transfer.export_database(db, args.target, progress=_progress(args))
    )
