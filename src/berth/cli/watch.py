"""``berth watch``: the change feed (``GET /berth/changes``) as JSON lines,
through direct access (``direct.py``: the real app in-process over the
configured database, so it holds no API worker), or with ``--url`` from a
server's watch stream (``GET /berth/changes/watch``); docs/change-feed.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from berth.cli import common

_FILTERS = ("kind", "tree", "consumer", "project")


def register(sub: common.Subparsers) -> None:
    parser = common.add_command(
        sub, "watch", "print the change feed's events as JSON lines",
        cmd_watch)
    parser.add_argument("--after", metavar="POSITION",
                        help="print the events after this position (a "
                             "Berth-Position header's value); default: "
                             "from now on")
    parser.add_argument("--kind", help="only these kinds (comma separated)")
    parser.add_argument("--tree", metavar="UUID",
                        help="only events of this provider's tree")
    parser.add_argument("--consumer", metavar="UUID",
                        help="only this consumer's allocation events")
    parser.add_argument("--project", help="only allocation events of this "
                                          "project's consumers")
    parser.add_argument("--interval", type=float, default=1.0,
                        metavar="SECONDS",
                        help="how often to read on (default 1)")
    parser.add_argument("--once", action="store_true",
                        help="print the events there are, then stop")
    parser.add_argument("--url", metavar="URL",
                        help="follow this server's watch stream instead "
                             "(its [berth] watch_listen, as "
                             "http://host:8779), as it commits")
    parser.add_argument("--token", default="admin",
                        help="X-Auth-Token for --url (default admin, as "
                             "noauth2 reads it)")


def _refused(body: dict[str, Any]) -> SystemExit:
    """One ``berth: error:`` line for a Placement-format error body (a
    410's detail says itself whether history was pruned, naming the
    oldest position kept, or the position is ahead of the database)."""
    from berth.api.errors import for_people
    return SystemExit("berth: error: %s"
                      % for_people(body["errors"][0]["detail"]))


def _page(http: Any, after: str, filters: dict[str, str]) -> dict[str, Any]:
    resp = http.get("/berth/changes", params={"after": after, **filters})
    body: dict[str, Any] = resp.json()
    if resp.status_code != 200:
        raise _refused(body)
    return body


def _stream(args: argparse.Namespace, filters: dict[str, str]) -> int:
    """Print the watch stream's events until it ends (``--url``)."""
    import httpx
    params = {"after": args.after or "now", "format": "jsonl", **filters}
    with httpx.stream("GET", args.url.rstrip("/") + "/berth/changes/watch",
                      params=params, headers={"x-auth-token": args.token},
                      timeout=httpx.Timeout(30, read=None)) as resp:
        if resp.status_code != 200:
            resp.read()
            raise _refused(resp.json())
        for line in resp.iter_lines():
            frame = json.loads(line)
            if "kind" in frame:
                print(json.dumps(frame, sort_keys=True), flush=True)
            elif args.once:  # a bookmark: caught up
                return 0
    return 0


def cmd_watch(args: argparse.Namespace) -> int:
    """Print each event as one JSON line, with the position to resume
    from after it (``"after"``); an error is one ``berth: error:``
    line (a 410: the events after that position are no longer kept, or
    it is ahead of the database: list again)."""
    from berth.direct import PlacementDirect
    from berth.domain.change import format_position, parse_position
    filters = {name: getattr(args, name) for name in _FILTERS
               if getattr(args, name) is not None}
    if args.url:
        return _stream(args, filters)
    with PlacementDirect(common.load_conf(args), microversion="latest") as http:
        after = args.after or http.get("/").headers["berth-position"]
        while True:
            page = _page(http, after, filters)
            # Resuming from an event's "after" gives the events after it
            # (one slot's numbers come in order, and a page never splits
            # a write); one followed by more of its write says the
            # position before the write, which a resumption sends whole.
            seen = parse_position(after)
            listed = page["events"]
            for n, event in enumerate(listed):
                before = format_position(seen)
                slot, seq = (int(x) for x in event["position"].split(":"))
                seen[slot] = seq
                more = (n + 1 < len(listed)
                        and listed[n + 1]["position"] == event["position"])
                print(json.dumps({**event, "after": before if more
                                  else format_position(seen)},
                                 sort_keys=True))
            sys.stdout.flush()
            after = page["position"]
            if page["more"]:
                continue
            if args.once:
                return 0
            time.sleep(args.interval)
