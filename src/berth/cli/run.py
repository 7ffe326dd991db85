"""The ``berth`` parser and its run: ``build_parser`` assembles every
command group's ``register``; ``main`` runs the chosen command, turning
any error into one ``berth: error:`` line (see the package docstring)."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import Any

from berth import __version__
from berth.cli import (
    common,
    db,
    explain,
    migrate_inventory,
    policy,
    serve,
    status,
    watch,
)


def build_parser() -> argparse.ArgumentParser:
    """The whole ``berth`` parser, its commands in the order ``--help``
    lists them."""
    parser = common.Parser(prog="berth", description="Berth: a fast OpenStack Placement service.")
    parser.add_argument("--version", action="version", version="berth %s" % __version__)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for module in (serve, db, policy, status, migrate_inventory, explain, watch):
        module.register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``berth`` with ``argv`` (default: the process's); exit status."""
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
        print("berth: error: %s" % common.one_line(exc), file=sys.stderr)
        return 1
