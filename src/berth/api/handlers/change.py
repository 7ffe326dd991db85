"""``GET /berth/changes``: the change feed (see ``docs/change-feed.md``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import falcon
from sqlalchemy.engine import Connection

from berth.api import util
from berth.api.schemas import change as schema
from berth.db import events
from berth.domain import change, common, errors

RULE = "berth:changes:list"
#: The whole feed's policy target project (``change.EVERY_PROJECT``).
EVERY_PROJECT = change.EVERY_PROJECT


def feed_query(params: dict[str, str], authorize: Callable[[str], None]
               ) -> tuple[events.Filters, tuple[str, ...] | None, int]:
    """The filters (narrowed by ``change.feed_filters``: ``authorize``
    raises Forbidden), trees and page size of a validated feed query:
    those of ``GET /berth/changes`` and of its watch form
    (``berth.serve.watch``)."""
    kinds = (frozenset(params["kind"].split(",")) if "kind" in params
             else None)
    filters = change.feed_filters(kinds, params.get("consumer"),
                                  params.get("project"), authorize)
    limit = min(int(params.get("limit", schema.DEFAULT_LIMIT)),
                schema.MAX_LIMIT)
    return filters, _trees(params.get("tree")), limit


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
    filters, trees, limit = feed_query(params, lambda project: util.authorize(
        req, RULE, {"project_id": project, "user_id": None}))

    def work(conn: Connection) -> events.Page:
        return change.read_feed(conn, params["after"], filters, trees, limit)

    page = util.db(req).read(work)
    util.send(req, resp, {
        "position": change.format_position(page.upto),
        "more": page.more,
        "events": [event_body(e) for e in page.events]}, cache=False)


def _trees(value: str | None) -> tuple[str, ...] | None:
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
    return tuple(found)


def event_body(e: events.Stored) -> dict[str, Any]:
    """One event as the feed shows it (here and in its watch form)."""
    return {"position": "%d:%d" % (e.slot, e.seq), "index": e.idx,
            "kind": e.kind, "subject": e.subject, "time": e.created_at,
            "new": e.new, "old": e.old}
