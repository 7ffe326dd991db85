"""``berth serve``: the API under gunicorn, in the foreground."""

from __future__ import annotations

import argparse

from berth.cli import common


def register(sub: common.Subparsers) -> None:
    serve = common.add_command(sub, "serve", "run the API server (foreground)", cmd_serve)
    serve.add_argument(
        "--host", default=None, help="address to bind (default %s)" % common.DEFAULT_HOST
    )
    serve.add_argument(
        "--port", type=int, default=None, help="port to bind (default %d)" % common.DEFAULT_PORT
    )
    serve.add_argument(
        "--unix-socket",
        metavar="PATH",
        default=None,
        help="serve on a unix socket at PATH (mode 0660: "
        "its user and group may connect) instead of "
        "--host and --port; an unused socket file "
        "there is replaced",
    )
    serve.add_argument(
        "--workers",
        type=common.at_least_one,
        default=None,
        help="worker processes (default: 1 on embedded SQLite, else the number of CPUs)",
    )


def cmd_serve(args: argparse.Namespace) -> int:
    if args.unix_socket is not None and (args.host, args.port) != (None, None):
        raise SystemExit(
            "berth: error: --unix-socket serves instead of --host and --port: give one or the other"
        )
    from berth import logs, serve

    # Before anything looks up a plugin (importing master does).
    serve.no_entry_point_cache()
    from berth.serve import master

    conf = common.load_conf(args)
    logs.setup(conf)
    return master.run(
        conf,
        host=args.host or common.DEFAULT_HOST,
        port=common.DEFAULT_PORT if args.port is None else args.port,
        workers=args.workers,
        unix_socket=args.unix_socket,
    )
