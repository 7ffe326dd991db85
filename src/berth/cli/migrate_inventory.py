"""``berth migrate-inventory``: a driver's start-up reshape, offline.

The agent loop's start-up pass (``berth.client.agent``) for each node,
through direct database access (``berth.direct``), with no server running.
"""

from __future__ import annotations

import argparse
import logging
from typing import TYPE_CHECKING

from berth.cli import common

if TYPE_CHECKING:
    from berth.client.agent import NodeResult


def register(sub: common.Subparsers) -> None:
    mig = common.add_command(
        sub,
        "migrate-inventory",
        "run a driver's start-up reshape offline, through direct database access",
        cmd_migrate_inventory,
    )
    mig.add_argument(
        "--driver", required=True, metavar="MODULE:CLASS", help="the virt driver class to load"
    )
    mig.add_argument(
        "--nodename",
        action="append",
        default=[],
        help="node to migrate (repeatable; default: the driver's nodes)",
    )
    mig.add_argument(
        "--retries", type=int, default=4, help="attempts per node on generation conflicts"
    )


def cmd_migrate_inventory(args: argparse.Namespace) -> int:
    """``berth migrate-inventory``: the start-up pass, offline.

    Exit 0 when every node is in its final shape (printing what was done,
    or that nothing needed doing), 1 when a node failed.
    """
    from berth.client import ReportClient
    from berth.client.agent import ResourceUpdater, load_driver
    from berth.direct import PlacementDirect

    conf = common.load_conf(args)
    logging.basicConfig(level=logging.WARNING)
    driver = load_driver(args.driver)
    known = list(driver.get_available_nodes())
    nodes = args.nodename or known
    failed = 0
    with PlacementDirect(conf) as http:
        client = ReportClient(http, retries=args.retries)
        updater = ResourceUpdater(driver, client)
        for node in nodes:
            if node not in known:
                failed += 1
                print(
                    "%s: failed: the driver has no node %s (its nodes: %s)"
                    % (node, node, ", ".join(known) or "none")
                )
                continue
            try:
                result = updater.sync_node(node, startup=True)
            except Exception as exc:  # noqa: BLE001 - report, next node
                failed += 1
                print("%s: failed: %s" % (node, _reason(exc)))
                continue
            print(_describe(result))
    return 1 if failed else 0


def _reason(exc: Exception) -> str:
    """One line for an error: its message, named by type when the message
    alone (a KeyError's bare key) would not say what went wrong."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, (KeyError, IndexError, AttributeError)) or not text:
        return "%s: %s" % (type(exc).__name__, text or "(no message)")
    return text


def _describe(result: NodeResult) -> str:
    if result.status == "unchanged":
        return "%s: nothing to migrate; no changes made" % result.nodename
    return "%s: %s (%d write%s)" % (
        result.nodename,
        result.status,
        result.writes,
        "" if result.writes == 1 else "s",
    )
