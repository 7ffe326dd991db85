"""``GET /berth/changes``: the change feed (see ``docs/change-feed.md``)."""

from __future__ import annotations

import falcon
from sqlalchemy.engine import Connection

from berth.api import util
from berth.api.schemas import change as schema
from berth.api.schemas.change import POLICY, feed_query
from berth.api.views.change import event_body
from berth.db import events
from berth.domain import change

#: The whole feed's policy target project (``change.EVERY_PROJECT``).
EVERY_PROJECT = change.EVERY_PROJECT
__all__ = ["EVERY_PROJECT", "POLICY", "list_changes"]


def list_changes(req: falcon.Request, resp: falcon.Response) -> None:
    """200 with the events after the ``after`` position, oldest first,
    and the position to read on from; 400 for a malformed query or
    position; 403 unless policy lets the caller read the feed (a project
    reader only with ``project`` set to its own project: it sees that
    project's allocation events); 406; 410 when the events after that
    position are no longer kept (the body names the oldest position
    kept) or it is ahead of the database (a restored backup)."""
    util.check_accept(req)
    params = util.query_dict(util.validate_query(req, schema.QUERY))
    filters, trees, limit = feed_query(
        params,
        lambda project: util.authorize(req, POLICY, {"project_id": project, "user_id": None}),
    )

    def work(conn: Connection) -> events.EventPage:
        return change.read_feed(conn, params["after"], filters, trees, limit)

    page = util.db(req).read(work)
    util.send(
        req,
        resp,
        {
            "position": str(page.upto),
            "more": page.more,
            "events": [event_body(e) for e in page.events],
        },
        cache=False,
    )
