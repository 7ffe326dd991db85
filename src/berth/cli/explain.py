"""``berth explain`` and ``berth fit``: the /berth/explain and /berth/fit
answers on the command line, through direct access (``direct.py``: the
real app in-process over the configured database, no server needed).
"""

from __future__ import annotations

import argparse
import json
from typing import Any
from urllib.parse import parse_qsl

from berth.cli import common


def register(sub: common.Subparsers) -> None:
    explain = _query_command(
        sub, "explain", "why an allocation-candidates query leaves trees out", cmd_explain
    )
    explain.add_argument(
        "--tree", metavar="UUID", help="also list every reason for this provider's tree"
    )
    _query_command(
        sub, "fit", "how many more copies of an allocation-candidates query fit", cmd_fit
    )


def _query_command(
    sub: common.Subparsers, name: str, help: str, func: common.Command
) -> argparse.ArgumentParser:
    parser = common.add_command(sub, name, help, func)
    parser.add_argument(
        "query",
        metavar="QUERY",
        help="an allocation-candidates query string, e.g. "
        "'resources=VCPU:2,MEMORY_MB:4096"
        "&required=HW_CPU_X86_AVX2'",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the JSON answer instead of a summary"
    )
    return parser


#: What a query looks like, for the line that refuses one that is not.
EXAMPLE = "resources=VCPU:4,MEMORY_MB:2048"


def _get(args: argparse.Namespace, path: str, extra: list[tuple[str, str]]) -> Any:
    """GET ``path`` with the query, as admin at the latest microversion;
    an error answer becomes one ``berth: error:`` line in plain words
    (an unknown resource class or trait with the nearest known name)."""
    from berth.direct import PlacementDirect

    try:
        pairs = parse_qsl(args.query, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        from berth.api.errors import shown

        raise SystemExit(
            "berth: error: expected a query such as %s; got %s" % (EXAMPLE, shown(args.query))
        ) from None
    # Reads only: a database that is not there is named, never created.
    with PlacementDirect(common.readable_conf(args), microversion="latest") as http:
        resp = http.get(path, params=pairs + extra)
        body = resp.json()
        if resp.status_code == 200:
            return body
        # The names an unknown class or trait is likely a typo of.
        names = [c["name"] for c in http.get("/resource_classes").json()["resource_classes"]]
        names += http.get("/traits").json()["traits"]
    from berth.api.errors import for_people
    from berth.api.schemas.allocation_candidate import QUERY_NAMES

    raise SystemExit(
        "berth: error: %s" % for_people(body["errors"][0]["detail"], known=QUERY_NAMES, names=names)
    )


def _named(uuid: str, name: str | None) -> str:
    """A provider as the summary shows it: its name, then its uuid."""
    return uuid if name is None else "%s (%s)" % (name, uuid)


def _describe(reason: dict[str, Any]) -> str:
    skip = ("reason", "providers", "provider_names", "tree", "tree_name")
    parts = [
        "%s=%s" % (k, ",".join(v) if isinstance(v, list) else '""' if v == "" else v)
        for k, v in reason.items()
        if k not in skip and v is not None
    ]
    if reason.get("providers"):
        names = reason.get("provider_names") or [None] * len(reason["providers"])
        parts.append(
            "providers=%s"
            % ", ".join(_named(u, n) for u, n in zip(reason["providers"], names, strict=True))
        )
    return " ".join(parts)


def cmd_explain(args: argparse.Namespace) -> int:
    """Why trees give no candidate: counts per reason with examples, or
    one tree's reasons with ``--tree``."""
    from berth.domain.common import is_uuid_like

    if args.tree is not None and not is_uuid_like(args.tree):
        from berth.api.errors import shown

        raise SystemExit("berth: error: --tree takes a provider uuid, not %s" % shown(args.tree))
    body = _get(
        args,
        "/berth/explain/allocation_candidates",
        [("explain_tree", args.tree)] if args.tree else [],
    )
    if args.json:
        print(json.dumps(body, indent=2))
        return 0
    trees = body["trees"]
    print(
        "%d trees considered, %d give a candidate, %d excluded"
        % (trees["considered"], trees["with_candidates"], trees["excluded"])
    )
    for item in body["reasons"]:
        print(
            "  %s: %d tree%s" % (item["reason"], item["trees"], "" if item["trees"] == 1 else "s")
        )
        for res in item.get("resources", []):
            print(
                "    group %r %s: needed %d, most free %d"
                % (res["group"], res["resource_class"], res["needed"], res["max_free"])
            )
        for example in item["examples"]:
            print(
                (
                    "    e.g. tree %s: %s"
                    % (_named(example["tree"], example.get("tree_name")), _describe(example))
                ).rstrip(": ")
            )
    tree = body.get("tree")
    if tree is not None:
        print(
            "tree %s: %s"
            % (
                _named(tree["root_provider_uuid"], tree.get("root_provider_name")),
                "gives a candidate" if tree["candidate"] else "excluded",
            )
        )
        for reason in tree["reasons"]:
            print(("  %s: %s" % (reason["reason"], _describe(reason))).rstrip(": "))
    return 0


def _count(item: dict[str, Any]) -> str:
    if item["exact"]:
        return "%d (exact)" % item["placed"]
    return "%d to %d (greedy placement to upper bound)" % (item["placed"], item["upper_bound"])


def cmd_fit(args: argparse.Namespace) -> int:
    """How many more copies of the request fit, in total, per tree and
    per aggregate."""
    body = _get(args, "/berth/fit", [])
    if args.json:
        print(json.dumps(body, indent=2))
        return 0
    print(
        "total: %s%s"
        % (_count(body["total"]), "" if body["complete"] else " (greedy placement stopped early)")
    )
    for tree in body["trees"]:
        print(
            "  tree %s: %s"
            % (_named(tree["root_provider_uuid"], tree.get("root_provider_name")), _count(tree))
        )
    for agg in body["aggregates"]:
        members = agg.get("member_trees")
        print(
            "  aggregate %s: %s"
            % (
                _named(agg["aggregate"], "with " + ", ".join(members) if members else None),
                _count(agg),
            )
        )
    return 0
