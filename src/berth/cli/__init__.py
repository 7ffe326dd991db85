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
    berth watch [--after POSITION] [--kind K] [--tree U] [--consumer U]
                [--project P] [--interval S] [--once]

One module per command group (``serve``, ``db``, ``policy``, ``status``,
``migrate_inventory``, ``explain``, ``watch``), each with a ``register`` that adds its
parsers; what they share is in ``common``. A command imports what it runs
when it runs, so ``berth --help`` loads no database driver.
``placement-manage`` and ``placement-status`` are in ``upstream``.

Errors print one line (``berth: error: ...``) and exit non-zero.
"""

from __future__ import annotations

from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> int:
    """``berth`` (the ``berth.cli:main`` entry point): see ``run.main``.

    The commands load only here, so that ``from berth.cli import common``
    (as every command module does) imports nothing else."""
    from berth.cli import run

    return run.main(argv)
