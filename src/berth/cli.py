"""The ``berth`` command line.

    berth serve [--config-file F ...] [--config-dir D] [--host H] [--port P]
                [--workers N]
    berth db sync | berth db version
    berth db import --from URL [--replace] [--json]
    berth db export --to URL [--json]
    berth db verify --against URL [--json]
    berth policy list
    berth status upgrade check
    berth migrate-inventory --driver module:Class [--nodename N ...]
    berth explain QUERY [--tree UUID] [--json]
    berth fit QUERY [--json]

Errors print one line (``berth: error: ...``) and exit non-zero.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from oslo_config import cfg

from berth import __version__
from berth import conf as berth_conf

LOG = logging.getLogger("berth")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8778


def _add_config_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config-file", action="append", default=[],
                        metavar="FILE",
                        help="placement.conf to read (repeatable; later "
                             "files override earlier ones)")
    parser.add_argument("--config-dir", action="append", default=[],
                        metavar="DIR",
                        help="folder of *.conf files read after the files")


def config_argv(args: argparse.Namespace) -> list[str]:
    """The oslo.config arguments for the command's config options."""
    argv: list[str] = []
    for path in args.config_file:
        if not os.path.exists(path):
            raise SystemExit("berth: error: config file %s not found" % path)
        argv += ["--config-file", os.path.abspath(path)]
    for path in args.config_dir:
        argv += ["--config-dir", os.path.abspath(path)]
    return argv


def load_conf(args: argparse.Namespace) -> cfg.ConfigOpts:
    """Configuration from the command's --config-file/--config-dir."""
    argv = config_argv(args)
    try:
        return berth_conf.load(argv)
    except (cfg.Error, ValueError) as exc:
        raise SystemExit("berth: error: bad configuration: %s"
                         % str(exc).splitlines()[0]) from None


def _logging(conf: cfg.ConfigOpts | None = None) -> None:
    debug = bool(conf is not None and conf.debug)
    logging.basicConfig(
        level=logging.DEBUG if debug else logging.INFO,
        format="%(asctime)s %(process)d %(levelname)s %(name)s %(message)s",
        stream=sys.stderr)
    logging.getLogger("alembic").setLevel(logging.WARNING)


def cmd_serve(args: argparse.Namespace) -> int:
    from berth import server
    conf = load_conf(args)
    _logging(conf)
    return server.run(conf, host=args.host, port=args.port,
                      workers=args.workers)


def cmd_db_sync(args: argparse.Namespace) -> int:
    from berth.db import migrate, setup, urls
    conf = load_conf(args)
    print("database: %s" % urls.masked(berth_conf.database_url(conf)))
    engine = setup.engine_from_conf(conf)
    migrate.upgrade(engine)
    print("database at revision %s" % migrate.current_revision(engine))
    return 0


def cmd_db_version(args: argparse.Namespace) -> int:
    from berth.db import migrate, setup, urls
    conf = load_conf(args)
    print("database: %s" % urls.masked(berth_conf.database_url(conf)))
    engine = setup.engine_from_conf(conf)
    current = migrate.current_revision(engine)
    print("current: %s\nhead: %s" % (current or "none (empty database)",
                                       migrate.head_revision()))
    return 0


def cmd_policy_list(args: argparse.Namespace) -> int:
    from berth import policy
    conf = load_conf(args)
    for rule in policy.rule_defaults(conf.oslo_policy.enforce_scope):
        print('"%s": "%s"' % (rule.name, rule.check_str))
        if rule.description:
            print("    # %s" % rule.description.strip().splitlines()[0])
    return 0


def _plugin(name: str) -> Callable[[argparse.Namespace], int]:
    """Commands whose modules load only when used."""
    def run(args: argparse.Namespace) -> int:
        import importlib
        module, func = name.split(":")
        fn: Callable[[argparse.Namespace], int] = getattr(
            importlib.import_module(module), func)
        return fn(args)
    return run


def _at_least_one(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a whole number" % text) from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1, not %d" % value)
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="berth", description="Berth: a fast OpenStack Placement service.")
    parser.add_argument("--version", action="version",
                        version="berth %s" % __version__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    serve = sub.add_parser("serve", help="run the API server (foreground)")
    _add_config_args(serve)
    serve.add_argument("--host", default=DEFAULT_HOST,
                       help="address to bind (default %(default)s)")
    serve.add_argument("--port", type=int, default=DEFAULT_PORT,
                       help="port to bind (default %(default)s)")
    serve.add_argument("--workers", type=_at_least_one, default=None,
                       help="worker processes (default: 1 on embedded "
                            "SQLite, else the number of CPUs)")
    serve.set_defaults(func=cmd_serve)

    db = sub.add_parser("db", help="database migrations")
    dbsub = db.add_subparsers(dest="db_command", metavar="ACTION")
    dbsub.required = True
    sync = dbsub.add_parser("sync", help="apply every migration and seed "
                                         "standard classes and traits")
    _add_config_args(sync)
    sync.set_defaults(func=cmd_db_sync)
    version = dbsub.add_parser("version", help="show the current and the "
                                               "newest migration")
    _add_config_args(version)
    version.set_defaults(func=cmd_db_version)
    imp = dbsub.add_parser("import", help="copy an upstream Placement "
                                          "database into this one, and verify")
    _add_config_args(imp)
    imp.add_argument("--from", dest="source", required=True, metavar="URL",
                     help="upstream's database (only read)")
    imp.add_argument("--replace", action="store_true",
                     help="overwrite a Berth database that holds data")
    imp.add_argument("--json", action="store_true",
                     help="print the report as JSON (no progress)")
    imp.set_defaults(func=_plugin("berth.importexport:cmd_import"))
    exp = dbsub.add_parser("export", help="write this database into an "
                                          "empty one in upstream's schema "
                                          "(16.0.0 head), and verify")
    _add_config_args(exp)
    exp.add_argument("--to", dest="target", required=True, metavar="URL",
                     help="an empty database")
    exp.add_argument("--json", action="store_true",
                     help="print the report as JSON (no progress)")
    exp.set_defaults(func=_plugin("berth.importexport:cmd_export"))
    ver = dbsub.add_parser("verify", help="compare this database with an "
                                          "upstream one, as import and "
                                          "export do; exit 1 if they differ")
    _add_config_args(ver)
    ver.add_argument("--against", dest="other", required=True, metavar="URL",
                     help="upstream's database (only read)")
    ver.add_argument("--json", action="store_true",
                     help="print the report as JSON")
    ver.set_defaults(func=_plugin("berth.importexport:cmd_verify"))

    pol = sub.add_parser("policy", help="policy rules")
    polsub = pol.add_subparsers(dest="policy_command", metavar="ACTION")
    polsub.required = True
    plist = polsub.add_parser("list", help="print every rule and its default")
    _add_config_args(plist)
    plist.set_defaults(func=cmd_policy_list)

    status = sub.add_parser("status", help="operator checks")
    stsub = status.add_subparsers(dest="status_command", metavar="ACTION")
    stsub.required = True
    upgrade = stsub.add_parser("upgrade", help="upgrade readiness")
    upsub = upgrade.add_subparsers(dest="upgrade_command", metavar="ACTION")
    upsub.required = True
    check = upsub.add_parser("check", help="report migrations, incomplete "
                                           "consumers, orphans and policy "
                                           "problems; exit 0, 1 or 2")
    _add_config_args(check)
    check.add_argument("--json", action="store_true",
                       help="print the results as JSON, as "
                            "oslo.upgradecheck does")
    check.set_defaults(func=_plugin("berth.status:cmd_upgrade_check"))

    mig = sub.add_parser("migrate-inventory",
                         help="run a driver's start-up reshape offline, "
                              "through direct database access")
    _add_config_args(mig)
    mig.add_argument("--driver", required=True, metavar="MODULE:CLASS",
                     help="the virt driver class to load")
    mig.add_argument("--nodename", action="append", default=[],
                     help="node to migrate (repeatable; default: the "
                          "driver's nodes)")
    mig.add_argument("--retries", type=int, default=4,
                     help="attempts per node on generation conflicts")
    mig.set_defaults(func=_plugin("berth.agent:cmd_migrate_inventory"))

    explain = sub.add_parser("explain", help="why an allocation-candidates "
                                             "query leaves trees out")
    _add_query_args(explain)
    explain.add_argument("--tree", metavar="UUID",
                         help="also list every reason for this provider's "
                              "tree")
    explain.set_defaults(func=_plugin("berth.explain_fit:cmd_explain"))
    fit = sub.add_parser("fit", help="how many more copies of an "
                                     "allocation-candidates query fit")
    _add_query_args(fit)
    fit.set_defaults(func=_plugin("berth.explain_fit:cmd_fit"))
    return parser


def _add_query_args(parser: argparse.ArgumentParser) -> None:
    _add_config_args(parser)
    parser.add_argument("query", metavar="QUERY",
                        help="an allocation-candidates query string, e.g. "
                             "'resources=VCPU:2,MEMORY_MB:4096"
                             "&required=HW_CPU_X86_AVX2'")
    parser.add_argument("--json", action="store_true",
                        help="print the JSON answer instead of a summary")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        result: Any = args.func(args)
        sys.stdout.flush()
        return int(result or 0)
    except SystemExit:
        raise
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`berth policy list | head -1`): what it
        # read is what it wanted. Point stdout at /dev/null so the flush
        # at exit cannot raise again, and end quietly.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except Exception as exc:  # noqa: BLE001 - one clear line, no traceback
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        print("berth: error: %s" % message, file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
