"""``berth serve``: the API under gunicorn, in the foreground."""

from __future__ import annotations

import argparse

from berth.cli import common


def register(sub: common.Subparsers) -> None:
    serve = common.add_command(sub, "serve", "run the API server (foreground)",
                               cmd_serve)
    serve.add_argument("--host", default=common.DEFAULT_HOST,
                       help="address to bind (default %(default)s)")
    serve.add_argument("--port", type=int, default=common.DEFAULT_PORT,
                       help="port to bind (default %(default)s)")
    serve.add_argument("--workers", type=common.at_least_one, default=None,
                       help="worker processes (default: 1 on embedded "
                            "SQLite, else the number of CPUs)")


def cmd_serve(args: argparse.Namespace) -> int:
    from berth import logs, serve
    # Before anything looks up a plugin (importing master does).
    serve.no_entry_point_cache()
    from berth.serve import master
    conf = common.load_conf(args)
    logs.setup(conf)
    return master.run(conf, host=args.host, port=args.port,
                      workers=args.workers)
