"""``GET /berth/changes``: the change feed (see ``docs/change-feed.md``)."""

from __future__ import annotations

from typing import Any

import falcon
from sqlalchemy.engine import Connection

from berth.api import util
from berth.api.schemas import change as schema
from berth.db import events
from berth.domain import change, common, errors

RULE = "berth:changes:list"
#: The project of the whole feed's policy target: no caller's project is
#: this, so ``project_id:%(project_id)s`` never matches it (not even a
#: caller with no project, whose project reads as "None" to oslo.policy).
EVERY_PROJECT = "(every project)"


def _filters(req: falcon.Request, params: dict[str, str]) -> events.Filters:
    """The filters asked for, narrowed to the caller's project's consumer
    events when policy lets the caller read no more than that."""
    kinds = (frozenset(params["kind"].split(",")) if "kind" in params
             else None)
    consumer = params.get("consumer")
    project = params.get("project")
    try:  # the whole feed
        util.authorize(req, RULE, {"project_id": EVERY_PROJECT,
                                   "user_id": None})
    except errors.Forbidden:
        # A project reader: only its own project's consumers, named.
        if project is None:
            raise
        util.authorize(req, RULE, {"project_id": project, "user_id": None})
        allowed = frozenset(events.ALLOCATION_KINDS)
        kinds = allowed if kinds is None else kinds & allowed
    return events.Filters(
        kinds, None if consumer is None else frozenset(
            [common.normalize_uuid(consumer) or consumer]), project)


def list_changes(req: falcon.Request, resp: falcon.Response) -> None:
    """200 with the events after the ``after`` position, oldest first,
    and the position to read on from; 400 for a malformed query or
    position; 403 unless policy lets the caller read the feed (a project
    reader only with ``project`` set to its own project: it sees that
    project's allocation events); 406; 410 when the events after that
    position are no longer kept (the body names the oldest position
    kept)."""
    util.check_accept(req)
    params = util.query_dict(util.validate_query(req, schema.QUERY))
    filters = _filters(req, params)
    limit = min(int(params.get("limit", schema.DEFAULT_LIMIT)),
                schema.MAX_LIMIT)
    trees = _trees(params.get("tree"))

    def work(conn: Connection) -> events.Page:
        return change.read_feed(conn, params["after"], filters, trees, limit)

    page = util.db(req).read(work)
    util.send(req, resp, {
        "position": change.format_position(page.upto),
        "more": page.more,
        "events": [_event(e) for e in page.events]}, cache=False)


def _trees(value: str | None) -> list[str] | None:
    """The provider uuids of the ``tree`` filter (comma separated), or
    QueryBadValue (400) naming one that is not a uuid."""
    if value is None:
        return None
    found = []
    for item in value.split(","):
        uuid = common.normalize_uuid(item)
        if uuid is None:
            raise errors.QueryBadValue(
                "Invalid tree %r: expected provider uuids, comma separated "
                "(at most %d)." % (item, schema.MAX_TREES))
        found.append(uuid)
    return found


def _event(e: events.Stored) -> dict[str, Any]:
    return {"position": "%d:%d" % (e.slot, e.seq), "index": e.idx,
            "kind": e.kind, "subject": e.subject, "time": e.created_at,
            "new": e.new, "old": e.old}
