"""What every ``berth`` command shares: the configuration arguments and
loading, the default address, and argument types.

Errors are one line (``berth: error: ...``) and a non-zero exit.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from oslo_config import cfg

from berth import conf as berth_conf

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8778

#: ``subparsers.add_parser`` of an ``argparse`` sub-command group.
Subparsers = Any
#: A command: the parsed arguments in, the exit status out.
Command = Callable[[argparse.Namespace], int]


def add_config_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--config-file", action="append", default=[],
                        metavar="FILE",
                        help="placement.conf to read (repeatable; later "
                             "files override earlier ones)")
    parser.add_argument("--config-dir", action="append", default=[],
                        metavar="DIR",
                        help="folder of *.conf files read after the files")


def add_command(sub: Subparsers, name: str, help: str, func: Command,
                config: bool = True) -> argparse.ArgumentParser:
    """A sub-command ``name`` running ``func``, with the configuration
    arguments unless ``config`` is false."""
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help)
    if config:
        add_config_args(parser)
    parser.set_defaults(func=func)
    return parser


def add_group(sub: Subparsers, name: str, help: str) -> Subparsers:
    """A sub-command ``name`` that only holds sub-commands (ACTION)."""
    parser = sub.add_parser(name, help=help)
    group = parser.add_subparsers(dest=name.replace("-", "_") + "_command",
                                  metavar="ACTION")
    group.required = True
    return group


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


def at_least_one(text: str) -> int:
    """An ``argparse`` type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a whole number" % text) from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1, not %d" % value)
    return value
