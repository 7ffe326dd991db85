"""``berth watch``: the change feed (``GET /berth/changes``) as JSON lines,
through direct access (``direct.py``: the real app in-process over the
configured database, so it holds no API worker), or with ``--url`` from a
server's watch stream (``GET /berth/changes/watch``), reconnecting when
the connection drops and resuming from the last frame's position;
docs/change-feed.md.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Iterator
from typing import Any

from berth.cli import common

_FILTERS = ("kind", "tree", "consumer", "project")
#: Seconds before the first reconnection, doubled per attempt up to the
#: last (each with up to a quarter more at random, so that the watchers
#: of a restarted server do not all come back in the same instant).
_BACKOFF = (0.5, 10.0)


def register(sub: common.Subparsers) -> None:
    parser = common.add_command(
        sub, "watch", "print the change feed's events as JSON lines", cmd_watch
    )
    parser.add_argument(
        "--after",
        metavar="POSITION",
        help="print the events after this position (a "
        "Berth-Position header's value); default: "
        "from now on",
    )
    parser.add_argument("--kind", help="only these kinds (comma separated)")
    parser.add_argument("--tree", metavar="UUID", help="only events of this provider's tree")
    parser.add_argument("--consumer", metavar="UUID", help="only this consumer's allocation events")
    parser.add_argument("--project", help="only allocation events of this project's consumers")
    parser.add_argument(
        "--interval",
        type=float,
        default=1.0,
        metavar="SECONDS",
        help="how often to read on (default 1)",
    )
    parser.add_argument("--once", action="store_true", help="print the events there are, then stop")
    parser.add_argument(
        "--url",
        metavar="URL",
        help="follow this server's watch stream instead "
        "(its [berth] watch_listen, as "
        "http://host:8779), as it commits",
    )
    parser.add_argument(
        "--token",
        default="admin",
        help="X-Auth-Token for --url (default admin, as noauth2 reads it)",
    )
    parser.add_argument(
        "--retry-for",
        type=float,
        default=300.0,
        metavar="SECONDS",
        help="with --url, how long to keep reconnecting "
        "(from the last frame's position) once the "
        "server cannot be reached, before giving up "
        "(default 300; 0: give up at once)",
    )


def _refused(body: dict[str, Any]) -> SystemExit:
    """One ``berth: error:`` line for a Placement-format error body (a
    410's detail says itself whether history was pruned, naming the
    oldest position kept, or the position is ahead of the database)."""
    from berth.api.errors import for_people

    return SystemExit("berth: error: %s" % for_people(body["errors"][0]["detail"]))


def _page(http: Any, after: str, filters: dict[str, str]) -> dict[str, Any]:
    resp = http.get("/berth/changes", params={"after": after, **filters})
    body: dict[str, Any] = resp.json()
    if resp.status_code != 200:
        raise _refused(body)
    return body


class _Lost(Exception):
    """The stream could not be opened, or ended (``opened``: after it was
    opened, so the server was reached)."""

    def __init__(self, reason: str, opened: bool) -> None:
        super().__init__(reason)
        self.opened = opened


def _follow(args: argparse.Namespace, url: str, params: dict[str, str], attempt: int) -> bool:
    """Print the stream's events from ``params["after"]``, moving it to
    each frame's ``after``; True once ``--once`` has caught up. Raises
    _Lost when the connection fails or ends, SystemExit when the server
    refuses (a 410: the position is gone, list again)."""
    import httpx

    opened = False
    try:
        with httpx.stream(
            "GET",
            url,
            params=params,
            headers={"x-auth-token": args.token},
            timeout=httpx.Timeout(30, read=None),
        ) as resp:
            if resp.status_code in (502, 503, 504):  # a proxy's: retry
                raise _Lost("HTTP %d" % resp.status_code, False)
            if resp.status_code != 200:
                resp.read()
                try:
                    body = resp.json()
                except ValueError:
                    raise SystemExit(
                        "berth: error: %s answers %d" % (url, resp.status_code)
                    ) from None
                raise _refused(body)
            opened = True
            if attempt:
                _say("reconnected to %s; reading on from %s" % (url, params["after"]))
            if _print_writes(args, resp.iter_lines(), params):
                return True
    except httpx.TransportError as exc:
        raise _Lost(str(exc) or type(exc).__name__, opened) from exc
    raise _Lost("the server ended the stream", True)


def _print_writes(args: argparse.Namespace, lines: Iterator[str], params: dict[str, str]) -> bool:
    """Print each write's events once its last one has come, and move
    ``params["after"]`` past it: an event followed by more of its write
    has the position before the write as ``after`` (resuming from it
    sends the write whole), so printing it sooner would print it twice
    after a reconnection (the watch marks a write's last event it sends
    with an ``after`` past the write). True at ``--once``'s first
    bookmark, False when the stream ends."""
    from berth.position import Position

    write: list[dict[str, Any]] = []
    for line in lines:
        frame = json.loads(line)
        if "kind" in frame:
            write.append(frame)
            ((slot, seq),) = Position.parse(frame["position"]).seqs
            if Position.parse(frame["after"]).get(slot) < seq:
                continue  # more of this write to come
            for event in write:
                print(json.dumps(event, sort_keys=True))
            sys.stdout.flush()
            write.clear()
        elif args.once:  # a bookmark: caught up
            return True
        params["after"] = frame["after"]
    return False


def _say(line: str) -> None:
    print("berth watch: " + line, file=sys.stderr, flush=True)


def _stream(args: argparse.Namespace, filters: dict[str, str]) -> int:
    """Print the watch stream's events (``--url``), reconnecting with
    backoff from the last frame's position for up to ``--retry-for``
    seconds after the server was last reached; one stderr line per
    attempt, and an exit status of 1 naming the URL when it gives up."""
    url = args.url.rstrip("/") + "/berth/changes/watch"
    params = {"after": args.after or "now", "format": "jsonl", **filters}
    attempt, lost_at, reached = 0, time.monotonic(), False
    while True:
        try:
            if _follow(args, url, params, attempt):
                return 0
        except _Lost as exc:
            if exc.opened:
                attempt, lost_at, reached = 0, time.monotonic(), True
            attempt += 1
            waited = time.monotonic() - lost_at
            if waited >= args.retry_for:
                _say(
                    "giving up on %s after %d attempt%s in %.0f s "
                    "(--retry-for %g): %s; resume with --after %s"
                    % (
                        url,
                        attempt,
                        "" if attempt == 1 else "s",
                        waited,
                        args.retry_for,
                        exc,
                        params["after"],
                    )
                )
                return 1
            what = ("connection to %s lost" if reached else "cannot connect to %s") % url
            _say(
                "%s (%s); reconnecting from %s (attempt %d)" % (what, exc, params["after"], attempt)
            )
            delay = min(_BACKOFF[0] * 2 ** (attempt - 1), _BACKOFF[1])
            time.sleep(min(delay * (1 + random.random() / 4), args.retry_for - waited))


def cmd_watch(args: argparse.Namespace) -> int:
    """Print each event as one JSON line, with the position to resume
    from after it (``"after"``); an error is one ``berth: error:``
    line (a 410: the events after that position are no longer kept, or
    it is ahead of the database: list again)."""
    from berth.direct import PlacementDirect
    from berth.domain.change import parse_position

    filters = {name: getattr(args, name) for name in _FILTERS if getattr(args, name) is not None}
    if args.url:
        return _stream(args, filters)
    conf = common.readable_conf(args)
    with PlacementDirect(conf, microversion="latest") as http:
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
                before = str(seen)
                ((slot, seq),) = parse_position(event["position"]).seqs
                seen = seen.past(slot, seq)
                more = n + 1 < len(listed) and listed[n + 1]["position"] == event["position"]
                print(json.dumps({**event, "after": before if more else str(seen)}, sort_keys=True))
            sys.stdout.flush()
            after = page["position"]
            if page["more"]:
                continue
            if args.once:
                return 0
            time.sleep(args.interval)
