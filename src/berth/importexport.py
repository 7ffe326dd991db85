"""``berth db import``, ``export`` and ``verify``: the command-line side of
``berth.db.transfer`` (progress on a terminal, a summary or a JSON report).
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from berth.db import setup, transfer, upstream
from berth.db.engine import Database


def _progress(args: argparse.Namespace) -> transfer.Progress | None:
    if args.json or not sys.stderr.isatty():
        return None

    def show(table: str, rows: int, seconds: float) -> None:
        print("  %-30s %9d rows  %6.2fs" % (table, rows, seconds),
              file=sys.stderr, flush=True)
    return show


def _finish(args: argparse.Namespace, report: transfer.Report) -> int:
    if args.json:
        print(json.dumps(report.as_dict(), indent=2, sort_keys=True))
        return 0 if report.ok else 1
    print("%s: upstream revision %s" % (report.direction, report.revision))
    print("  %-30s %9s %7s %9s" % ("table", "source", "added", "target"))
    for c in report.tables:
        print("  %-30s %9d %7d %9d  %s" % (c.table, c.source, c.added,
                                           c.target, "ok" if c.ok else "DIFFERS"))
    print("verification:")
    for name, diffs in report.checks.items():
        print("  %-58s %s" % (name, "identical" if not diffs else "DIFFERS"))
        for line in diffs:
            print("      " + line)
    print("took %.1fs (%s)" % (sum(report.seconds.values()), ", ".join(
        "%s %.1fs" % kv for kv in report.seconds.items())))
    return 0 if report.ok else 1


def _run(args: argparse.Namespace,
         work: Callable[[Any, Database], transfer.Report],
         prepare: bool = False) -> int:
    """Run ``work(conf, db)`` on the configured database (migrated and
    seeded first with ``prepare``) and report; a transfer that cannot
    start is one error line."""
    from berth.cli import load_conf
    conf = load_conf(args)
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
    return (conf.placement.incomplete_consumer_project_id,
            conf.placement.incomplete_consumer_user_id)


def cmd_import(args: argparse.Namespace) -> int:
    return _run(args, lambda conf, db: transfer.import_database(
        args.source, db, replace=args.replace,
        incomplete_ids=_incomplete_ids(conf), progress=_progress(args)),
        prepare=True)


def cmd_verify(args: argparse.Namespace) -> int:
    return _run(args, lambda conf, db: transfer.verify_database(
        db, args.other, incomplete_ids=_incomplete_ids(conf)))


def cmd_export(args: argparse.Namespace) -> int:
    return _run(args, lambda conf, db: transfer.export_database(
        db, args.target, progress=_progress(args)))
