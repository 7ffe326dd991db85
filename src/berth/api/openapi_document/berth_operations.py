"""Berth's own operations, for the OpenAPI document: ``/healthcheck``,
the ``/berth/...`` endpoints (explain, fit, ordered candidates, the change
feed and its watch), the dashboard and ``/metrics``. Upstream's are in
``operations``, which adds these to ``OPERATIONS``."""

from __future__ import annotations

from typing import Any

from berth.api.openapi_document.describe import Operation, one
from berth.api.render import JSON
from berth.api.schemas import allocation_candidate as cand_s
from berth.api.schemas import change as change_s
from berth.api.schemas import responses as r
from berth.api.schemas import validator

#: The change feed's query, in words (``GET /berth/changes`` and the
#: forms that share its handler or its query).
_FEED_WORDS = {
    "after": "The position to read on from: `0` for the oldest event "
    "kept, or the `position` of an earlier answer or the "
    "Berth-Position header of any read.",
    "kind": "Only events of these kinds, comma-separated.",
    "tree": "Only events about these provider trees: provider uuids "
    "(any provider of a tree), comma-separated, at most 100.",
    "consumer": "Only the allocation events of this consumer (uuid).",
    "project": "Only the allocation events of this project (a project reader must name its own).",
    "limit": "The most events one answer lists (default 1000).",
}

#: The watch's query: the feed's, and the frames asked for (which the
#: watch server reads before validating the rest with the feed's schema).
_FEED_QUERY: dict[str, Any] = dict(change_s.QUERY.schema)  # type: ignore[arg-type]
_WATCH_QUERY = validator(
    {
        **_FEED_QUERY,
        "properties": {
            **_FEED_QUERY["properties"],
            "format": {"type": "string", "enum": ["jsonl", "sse"]},
        },
    }
)

#: An HTML page's body.
_HTML = {"text/html": {"schema": {"type": "string"}}}


#: (path, method) -> Operation, for the routes only Berth has.
BERTH_OPERATIONS: dict[tuple[str, str], Operation] = {
    ("/healthcheck", "GET"): Operation(
        "Health (oslo.middleware's healthcheck): 200 when the database "
        "answers, 503 when not. Without a token the plain answer; the "
        "details (backend, latency, cache lag) need policy "
        "berth:healthcheck:details.",
        {200: {"type": "string"}},
        errors=(503,),
        public=True,
        media={"text/plain": {"schema": {"type": "string"}}, JSON: {"schema": {"type": "object"}}},
    ),
    ("/healthcheck", "HEAD"): Operation(
        "Health without a body: 204 when the database answers, 503 when not.",
        {204: None},
        errors=(503,),
        public=True,
    ),
    ("/berth/explain/allocation_candidates", "GET"): Operation(
        "Why trees give no allocation candidate for this "
        "allocation-candidates query: trees considered, dropped per "
        "reason, examples (policy berth:explain, admin).",
        {200: {"type": "object"}},
        errors=(404,),
        query=cand_s.ORDERED_SCHEMAS,
        description="Takes the same query as GET "
        "/berth/allocation_candidates, plus `explain_tree=<provider uuid>` "
        "for the exact reasons of one tree (404 when no provider has that "
        "uuid). In a scored order (spread, pack) the answer lists the "
        "trees the query would get first, with their scores. See "
        "docs/explain-and-fit.md.",
    ),
    ("/berth/allocation_candidates", "GET"): Operation(
        "GET /allocation_candidates with the order chosen per request: "
        "order (uuid, random, spread, pack), weights (CLASS:weight,...) "
        "and prefer (TRAIT:weight,...).",
        {200: r.CANDIDATES},
        query=cand_s.ORDERED_SCHEMAS,
        description="The same query and answer as GET "
        "/allocation_candidates (policy "
        "placement:allocation_candidates:list), plus the order "
        "parameters, each defaulting to its [berth] option. With limit=N "
        "the answer holds N of the best candidates by the score of "
        'docs/allocation-candidates.md, "Order".',
    ),
    ("/berth/fit", "GET"): Operation(
        "How many more copies of this allocation-candidates query fit, in "
        "total, per tree and per aggregate, with an upper bound (policy "
        "berth:fit, admin).",
        {200: {"type": "object"}},
        query=cand_s.SCHEMAS,
        description="See docs/explain-and-fit.md for how the count and the bound are worked out.",
    ),
    ("/berth/changes", "GET"): Operation(
        "The change feed: the events after a position (the Berth-Position "
        "header of any read), oldest first, and the position to read on "
        "from (policy berth:changes:list).",
        {200: r.CHANGES},
        errors=(410,),
        query=(("1.0", change_s.QUERY),),
        words=_FEED_WORDS,
        description="Filters: `kind` (comma-separated), `tree`, "
        "`consumer`, `project`; `limit` (default 1000). 410 when the "
        "events after `after` are no longer kept. See "
        "docs/change-feed.md.",
    ),
    ("/berth/changes/watch", "GET"): Operation(
        "The change feed as a stream: the events after a position, then "
        "each event as it is written, with a bookmark when idle (policy "
        "berth:changes:list). Served by berth serve's watch server, on "
        "[berth] watch_listen, not by the API's own listener.",
        {200: {"type": "string"}},
        errors=(410,),
        query=one(_WATCH_QUERY),
        served_by="berth.serve.watch",
        words={
            **_FEED_WORDS,
            "after": _FEED_WORDS["after"] + " `now`: from the newest "
            "position on. A reconnecting EventSource's Last-Event-ID "
            "header stands for it.",
            "limit": "The most events the first page (before the "
            "live stream) reads at once (default 1000).",
            "format": "The frames: `jsonl` (JSON lines) or `sse` "
            "(Server-Sent Events); by default as Accept asks.",
        },
        media={
            "application/x-ndjson": {"schema": {"type": "string"}},
            "text/event-stream": {"schema": {"type": "string"}},
        },
        description="Frames: JSON lines (the default), or Server-Sent "
        "Events with `Accept: text/event-stream` or `format=sse` "
        "(`format=jsonl` for JSON lines). Every event is the object GET "
        "/berth/changes lists plus `after`, the position to resume from. "
        "Errors before the stream starts use the API's format and "
        "mapping. See docs/change-feed.md.",
    ),
    # The dashboard (docs/dashboard.md): HTML for browsers, policy
    # berth:dashboard (admin); under noauth2 a browser's request without
    # a token stands for admin.
    ("/dashboard", "GET"): Operation(
        "Dashboard overview: capacity, used and free per resource class, "
        "cloud-wide and per aggregate, and the fullest providers (HTML; "
        "304 while the change sequence has not moved).",
        {200: {"type": "string"}},
        errors=(304,),
        media=_HTML,
        description="Query: `page`.",
        token_optional=True,
    ),
    ("/dashboard/providers", "GET"): Operation(
        "Dashboard provider trees: search by name, uuid, trait or aggregate (HTML).",
        {200: {"type": "string"}},
        errors=(304,),
        media=_HTML,
        description="Query: `by`, `q`, `page`.",
        token_optional=True,
    ),
    ("/dashboard/consumers", "GET"): Operation(
        "Dashboard consumers: allocations by consumer, project, user or consumer type (HTML).",
        {200: {"type": "string"}},
        errors=(304,),
        media=_HTML,
        description="Query: `view`, `page`.",
        token_optional=True,
    ),
    ("/dashboard/explain", "GET"): Operation(
        "Dashboard explain form: why trees give no candidate for an "
        "allocation-candidates query (HTML).",
        {200: {"type": "string"}},
        media=_HTML,
        description="Query: `q`, the allocation-candidates query string.",
        token_optional=True,
    ),
    ("/dashboard/fit", "GET"): Operation(
        "Dashboard fit form: how many more copies of a request fit (HTML).",
        {200: {"type": "string"}},
        media=_HTML,
        description="Query: `q`, the allocation-candidates query string.",
        token_optional=True,
    ),
    ("/dashboard/first", "GET"): Operation(
        "Dashboard first hosts: the hosts an allocation-candidates query "
        "gets first in an order, with their scores (HTML).",
        {200: {"type": "string"}},
        errors=(304,),
        media=_HTML,
        description="Query: `q`, the allocation-candidates query string; "
        "`order`, `weights`, `prefer` as in GET "
        "/berth/allocation_candidates.",
        token_optional=True,
    ),
    ("/dashboard/changes", "GET"): Operation(
        "The change feed (GET /berth/changes, the same handler and policy "
        "berth:changes:list) where the dashboard's pages reach it for "
        "their live refresh.",
        {200: r.CHANGES},
        errors=(410,),
        query=(("1.0", change_s.QUERY),),
        token_optional=True,
        words=_FEED_WORDS,
        description="See GET /berth/changes and docs/dashboard.md.",
    ),
    ("/dashboard/seq", "GET"): Operation(
        "The change-sequence number the dashboard polls to refresh (plain text).",
        {200: {"type": "string"}},
        media={"text/plain": {"schema": {"type": "string"}}},
        token_optional=True,
    ),
    ("/dashboard/static/{name}", "GET"): Operation(
        "A file the dashboard ships (its stylesheet); no token needed.",
        {200: {"type": "string"}},
        errors=(404,),
        public=True,
        media={"text/css": {"schema": {"type": "string"}}},
    ),
    ("/metrics", "GET"): Operation(
        "Every worker's Prometheus metrics in the text format (policy berth:metrics:show, admin).",
        {200: {"type": "string"}},
        media={"text/plain": {"schema": {"type": "string"}}},
    ),
}
