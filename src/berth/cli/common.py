"""What every ``berth`` command shares: the configuration arguments and
loading, the default address, and argument types.

Errors are one line (``berth: error: ...``) and a non-zero exit.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from oslo_config import cfg

from berth import conf as berth_conf

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8778

#: ``subparsers.add_parser`` of an ``argparse`` sub-command group.
Subparsers = Any
#: A command: the parsed arguments in, the exit status out.
Command = Callable[[argparse.Namespace], int]


class Parser(argparse.ArgumentParser):
    """argparse's parser, whose errors come from the (sub-)command they
    concern, with its usage, and name the nearest known word."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        super().error(message + _did_you_mean(self, message))

    def parse_args(  # type: ignore[override]
        self,
        args: Sequence[str] | None = None,
        namespace: argparse.Namespace | None = None,
    ) -> argparse.Namespace:
        parsed, extras = self.parse_known_args(args, namespace)
        if extras:
            # argparse hands a sub-command's leftovers to the top parser,
            # whose usage is not the one the user needs.
            owner: Parser = getattr(parsed, "_parser", self)
            owner.error("unrecognized arguments: %s" % " ".join(extras))
        return parsed


def _did_you_mean(parser: argparse.ArgumentParser, message: str) -> str:
    """`` (did you mean X?)`` for an unknown option or command word."""
    if message.startswith("unrecognized arguments: "):
        words = message.split(": ", 1)[1].split()
        known = [o for o in parser._option_string_actions if o.startswith("--")]
        for word in words:
            if word.startswith("-"):
                near = difflib.get_close_matches(word.split("=", 1)[0], known, n=1)
                if near:
                    return " (did you mean %s?)" % near[0]
        return ""
    match = re.search(r"invalid choice: '([^']*)' \(choose from (.*)\)", message)
    if match:
        choices = re.findall(r"'([^']*)'", match.group(2))
        near = difflib.get_close_matches(match.group(1), choices, n=1)
        if near:
            return " (did you mean %s?)" % near[0]
    return ""


def add_config_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config-file",
        action="append",
        default=[],
        metavar="FILE",
        help="placement.conf to read (repeatable; later files override earlier ones)",
    )
    parser.add_argument(
        "--config-dir",
        action="append",
        default=[],
        metavar="DIR",
        help="folder of *.conf files read after the files",
    )


def add_command(
    sub: Subparsers, name: str, help: str, func: Command, *, config: bool = True
) -> argparse.ArgumentParser:
    """A sub-command ``name`` running ``func``, with the configuration
    arguments unless ``config`` is false."""
    parser: argparse.ArgumentParser = sub.add_parser(name, help=help)
    if config:
        add_config_args(parser)
    parser.set_defaults(func=func, _parser=parser)
    return parser


def add_group(sub: Subparsers, name: str, help: str) -> Subparsers:
    """A sub-command ``name`` that only holds sub-commands (ACTION)."""
    parser = sub.add_parser(name, help=help)
    group = parser.add_subparsers(dest=name.replace("-", "_") + "_command", metavar="ACTION")
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


def load_conf(args: argparse.Namespace, prog: str = "berth") -> cfg.ConfigOpts:
    """Configuration from the command's --config-file/--config-dir, with
    each unknown section or option reported on stderr (and fatal with
    ``[berth] strict_config``)."""
    return checked_conf(config_argv(args), prog)


def checked_conf(argv: list[str], prog: str = "berth") -> cfg.ConfigOpts:
    """``berth.conf.load(argv)``, its errors one line, and the unknown
    sections and options of its files reported (``berth.conf.check``)."""
    try:
        conf = berth_conf.load(argv)
    except (cfg.Error, ValueError) as exc:
        raise SystemExit(
            "%s: error: bad configuration: %s" % (prog, str(exc).splitlines()[0])
        ) from None
    report_unknown(conf, prog)
    return conf


def readable_conf(args: argparse.Namespace) -> cfg.ConfigOpts:
    """``load_conf`` for a command that only reads the database: one
    ``berth: error:`` line naming the database when there is none (an
    SQLite file that does not exist), which it never creates."""
    from berth.db import setup

    conf = load_conf(args)
    try:
        setup.engine_to_read(conf).dispose()
    except setup.NoDatabase as exc:
        raise SystemExit("berth: error: %s" % exc) from None
    return conf


def report_unknown(conf: cfg.ConfigOpts, prog: str) -> None:
    """Print a line for each unknown section or option of the files read;
    exit 1 after them when ``[berth] strict_config`` is set."""
    from berth.conf import check

    unknown = check.unknown_names(conf)
    fatal = conf.berth.strict_config
    for line in unknown:
        print("%s: %s: %s" % (prog, "error" if fatal else "warning", line), file=sys.stderr)
    if unknown and fatal:
        raise SystemExit(1)


def one_line(exc: BaseException) -> str:
    """What went wrong, on one line: a database error as its driver said
    it (without SQLAlchemy's wrapping), anything else its first line."""
    orig = getattr(exc, "orig", None)
    if orig is not None:
        return "database: %s" % one_line(orig)
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def at_least_one(text: str) -> int:
    """An ``argparse`` type: a whole number of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("%r is not a whole number" % text) from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1, not %d" % value)
    return value
