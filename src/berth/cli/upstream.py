"""``placement-manage`` and ``placement-status``, as upstream spells them.

Deployment tools (kolla-ansible, OpenStack-Ansible, charms) run
upstream's commands; these entry points accept the same arguments, read
``placement.conf`` the same way (``--config-file``/``--config-dir``
before the command, else oslo.config's search or
``OS_PLACEMENT_CONFIG_DIR``) and end with the same exit codes:

    placement-manage db sync                  0, 1 on error
    placement-manage db version               prints the revision; 0
    placement-manage db stamp VERSION         0, 1 for an unknown revision
    placement-manage db online_data_migrations [--max-count N]
        0 nothing (more) to do, 1 --max-count given and rows migrated,
        2 a migration failed and nothing else moved, 127 a bad --max-count
    placement-status upgrade check [--json]
        0 success, 1 warning, 2 failure, 255 the check itself crashed

Revisions are Berth's own (``berth db version`` lists them).
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from oslo_config import cfg

from berth import __version__
from berth import conf as berth_conf
from berth.cli import common

LOG = logging.getLogger("berth.manage")

#: Rows per batch when --max-count is not given, as upstream.
DEFAULT_BATCH = 50


def _conf(
    prog: str, argv: Sequence[str], handler: Callable[[Any], None], name: str
) -> cfg.ConfigOpts:
    conf = cfg.ConfigOpts()
    berth_conf.register_opts(conf)
    # A title, or argparse prints an empty section header above {db}.
    conf.register_cli_opt(
        cfg.SubCommandOpt(name, dest="command", title="commands", handler=handler)
    )
    try:
        conf(
            list(argv),
            project=berth_conf.PROJECT,
            prog=prog,
            version="berth %s" % __version__,
            validate_default_values=True,
            default_config_files=berth_conf.config_files_from_env(),
        )
        berth_conf.validate(conf)
    except (cfg.Error, ValueError) as exc:
        raise SystemExit(
            "%s: error: bad configuration: %s" % (prog, str(exc).splitlines()[0])
        ) from None
    common.report_unknown(conf, prog)
    logging.basicConfig(
        level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s"
    )
    return conf


def _table(headers: list[str], rows: list[list[Any]]) -> str:
    """A plain boxed table, shaped as the ones upstream prints."""
    cells = [headers] + [[str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"

    def line(row: list[str]) -> str:
        return "|" + "|".join(" %s " % v.ljust(w) for v, w in zip(row, widths, strict=True)) + "|"

    out = [rule, line(cells[0]), rule] + [line(r) for r in cells[1:]]
    return "\n".join(out + [rule])


# -- placement-manage -----------------------------------------------------


def _on_engine(conf: cfg.ConfigOpts, fn: Callable[[Any], object], read: bool = False) -> int:
    """Run ``fn(engine)`` on the configured database; exit code 0. With
    ``read`` (a command that only reads), no database is created: a
    missing one raises ``setup.NoDatabase``."""
    from berth.db import setup

    engine = (setup.engine_to_read if read else setup.engine_from_conf)(conf)
    try:
        fn(engine)
    finally:
        engine.dispose()
    return 0


def _db_sync(conf: cfg.ConfigOpts) -> int:
    from berth.db import setup

    return _on_engine(conf, setup.prepare)


def _db_version(conf: cfg.ConfigOpts) -> int:
    from berth.db import migrate

    return _on_engine(conf, lambda e: print(migrate.current_revision(e)), read=True)


def _db_stamp(conf: cfg.ConfigOpts) -> int:
    from berth.db import migrate

    return _on_engine(conf, lambda e: migrate.stamp(e, conf.command.version))


def _one_batch(
    conf: cfg.ConfigOpts, db: Any, limit: int
) -> tuple[dict[str, tuple[int, int]], bool]:
    """Each migration once, sharing ``limit`` rows between them; every
    migration in its own transaction. Returns (name -> (found, done),
    whether any raised)."""
    from berth.domain import online

    results: dict[str, tuple[int, int]] = {}
    failed, moved = False, 0
    for name, migration in online.MIGRATIONS:
        try:
            found, done = db.run(lambda conn, m=migration, n=limit - moved: m(conn, conf, n))
        except Exception:  # noqa: BLE001 - report it, run the others
            print("Error attempting to run %s" % name)
            LOG.exception("online data migration %s failed", name)
            failed, found, done = True, 0, 0
        if found:
            print("%d rows matched query %s, %d migrated" % (found, name, done))
        results[name] = (found, done)
        moved += done
        if moved >= limit:
            break
    return results, failed


def _db_online_data_migrations(conf: cfg.ConfigOpts) -> int:
    from berth.db.engine import Database
    from berth.db.setup import engine_from_conf

    given = conf.command.max_count
    limited = given is not None
    if limited:
        try:
            limit = int(given)
        except ValueError:
            limit = 0
        if limit < 1:
            print("Must supply a positive value for max_count")
            return 127
    else:
        limit = DEFAULT_BATCH
        print("Running batches of %d until complete" % limit)
    db = Database(engine_from_conf(conf))
    totals: dict[str, list[int]] = {}
    try:
        while True:
            batch, failed = _one_batch(conf, db, limit)
            moved = 0
            for name, (found, done) in batch.items():
                total = totals.setdefault(name, [0, 0])
                total[0] += found
                total[1] += done
                moved += done
            if limited or not moved:
                break
    finally:
        db.dispose()
    print(
        _table(
            ["Migration", "Total Found", "Completed"],
            [[name, f, d] for name, (f, d) in totals.items()],
        )
    )
    if failed and not (limited and moved):
        print("Some migrations failed unexpectedly. Check log for details.")
        return 2
    return 1 if moved else 0


def _manage_parsers(subparsers: Any) -> None:
    db = subparsers.add_parser("db", help="database commands")
    # No action prints the db commands' help and exits 0, as upstream.
    db.set_defaults(func=lambda conf: db.print_help())
    actions = db.add_subparsers(description="database commands")
    actions.add_parser("sync", help="Sync the database to the current version.").set_defaults(
        func=_db_sync
    )
    actions.add_parser("version", help="Report the current database version.").set_defaults(
        func=_db_version
    )
    stamp = actions.add_parser("stamp", help="Stamp the revision table with the given version.")
    stamp.add_argument("version", help="the version to stamp")
    stamp.set_defaults(func=_db_stamp)
    online = actions.add_parser("online_data_migrations", help="Run the online data migrations.")
    online.add_argument(
        "--max-count", metavar="<number>", help="Maximum number of objects to consider"
    )
    online.set_defaults(func=_db_online_data_migrations)


def manage_main(argv: Sequence[str] | None = None) -> int:
    """``placement-manage``."""
    prog = "placement-manage"
    conf = _conf(prog, sys.argv[1:] if argv is None else argv, _manage_parsers, "db")
    func = getattr(conf.command, "func", None)
    if func is None:
        conf.print_help()
        return 1
    try:
        return int(func(conf) or 0)
    except Exception as exc:  # noqa: BLE001 - one clear line, exit 1
        print("%s: error: %s" % (prog, _first_line(exc)), file=sys.stderr)
        return 1


# -- placement-status -----------------------------------------------------


def _status_parsers(subparsers: Any) -> None:
    upgrade = subparsers.add_parser("upgrade", help="upgrade readiness")
    upgrade.add_argument("check", choices=["check"], help="run the upgrade checks")
    upgrade.add_argument("--json", action="store_true", help="Output the results in JSON format.")


def status_main(argv: Sequence[str] | None = None) -> int:
    """``placement-status``."""
    from berth.cli import status

    prog = "placement-status"
    conf = _conf(prog, sys.argv[1:] if argv is None else argv, _status_parsers, "command")
    if getattr(conf.command, "name", None) != "upgrade":
        conf.print_help()
        return 1
    try:
        return status.report(conf, as_json=bool(conf.command.json))
    except Exception as exc:  # noqa: BLE001 - 255, as oslo.upgradecheck
        print("Error:\n%s" % _first_line(exc))
        return 255


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
