"""What each operation of the API does, for the OpenAPI document: the
summary, the success answers, the request schemas and the errors, per
(path, method) of the routes table. Request schemas are the very
``Versioned`` tables the handlers pick from, imported, never copied;
response schemas live in ``berth.api.schemas.responses``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from berth.api.schemas import FastValidator, Versioned, validator
from berth.api.schemas import aggregate as agg_s
from berth.api.schemas import allocation as alloc_s
from berth.api.schemas import allocation_candidate as cand_s
from berth.api.schemas import change as change_s
from berth.api.schemas import inventory as inv_s
from berth.api.schemas import reshaper as reshaper_s
from berth.api.schemas import resource_class as rc_s
from berth.api.schemas import resource_provider as rp_s
from berth.api.schemas import responses as r
from berth.api.schemas import trait as trait_s
from berth.api.schemas import usage as usage_s

JSON = "application/json"


@dataclass(frozen=True)
class Operation:
    """What one method of one route does, for the document.

    ``ok`` maps each success status to its body schema (None: no body);
    ``errors`` lists the statuses specific to the operation (the ones every
    operation may answer are added for all); ``cached`` marks answers that
    carry ``last-modified`` and ``cache-control`` from 1.15.
    """

    summary: str
    ok: dict[int, dict[str, Any] | None]
    body: Versioned = ()
    query: Versioned = ()
    errors: tuple[int, ...] = ()
    cached: bool = False
    description: str = ""
    public: bool = False
    links: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: The success body's media types when it is not JSON (media -> the
    #: OpenAPI media object).
    media: dict[str, Any] | None = None
    #: The token may be left out (the dashboard under noauth2, where a
    #: browser's request without one stands for admin).
    token_optional: bool = False
    #: What each Berth-only query parameter is, in words (upstream's are
    #: described by the microversion they appear in).
    words: dict[str, str] = field(default_factory=dict)
    #: The process serving a route of ``routes.SERVED_ELSEWHERE`` (empty:
    #: the API's own).
    served_by: str = ""


#: A body the handler does not read.
IGNORED = validator({"description": "Not read."})


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


def _one(schema: FastValidator) -> Versioned:
    return (("1.0", schema),)


_RP = "/resource_providers/{uuid}"
_NEW_PROVIDER = {"uuid": "$response.body#/uuid"}
_SAME_PROVIDER = {"uuid": "$request.path.uuid"}
_SAME_CONSUMER = {"consumer_uuid": "$request.path.consumer_uuid"}


def operation_id(method: str, path: str) -> str:
    """The operation's id: the method and the path's words, as
    ``get_resource_providers_uuid``."""
    words = [w.strip("{}") for w in path.strip("/").split("/") if w]
    return "_".join([method.lower()] + (words or ["root"])).replace(".", "_")


def _link(method: str, path: str, parameters: dict[str, str], body: Any = None) -> dict[str, Any]:
    """An OpenAPI link to ``method path`` (stateful test tools follow
    these: a new provider's uuid feeds its inventories, and so on)."""
    link: dict[str, Any] = {"operationId": operation_id(method, path), "parameters": parameters}
    if body is not None:
        link["requestBody"] = body
    return link


#: (path, method) -> Operation. The lead adds an entry with each new route.
OPERATIONS: dict[tuple[str, str], Operation] = {
    ("/", "GET"): Operation(
        "Version discovery: the microversions this server speaks.", {200: r.VERSIONS}, public=True
    ),
    ("/openapi.json", "GET"): Operation(
        "This document: the whole API as OpenAPI 3.1.", {200: {"type": "object"}}, public=True
    ),
    ("/resource_providers", "GET"): Operation(
        "List resource providers, filtered by name, uuid, tree, "
        "aggregates, traits and available resources.",
        {200: r.PROVIDERS},
        cached=True,
        query=rp_s.LIST_QUERIES,
    ),
    ("/resource_providers", "POST"): Operation(
        "Create a resource provider (201 without a body before 1.20, "
        "200 with the provider from 1.20).",
        {200: r.PROVIDER, 201: None},
        errors=(409,),
        cached=True,
        body=rp_s.POST_BODIES,
        links={
            200: {
                "SetInventories": _link("PUT", _RP + "/inventories", _NEW_PROVIDER),
                "AddInventory": _link("POST", _RP + "/inventories", _NEW_PROVIDER),
                "SetTraits": _link("PUT", _RP + "/traits", _NEW_PROVIDER),
                "SetAggregates": _link("PUT", _RP + "/aggregates", _NEW_PROVIDER),
                "GetProvider": _link("GET", _RP, _NEW_PROVIDER),
            }
        },
    ),
    (_RP, "GET"): Operation(
        "Show one resource provider.", {200: r.PROVIDER}, errors=(404,), cached=True
    ),
    (_RP, "PUT"): Operation(
        "Rename a provider or (from 1.14) set its parent; re-parenting from 1.37.",
        {200: r.PROVIDER},
        errors=(404, 409),
        cached=True,
        body=rp_s.PUT_BODIES,
    ),
    (_RP, "DELETE"): Operation(
        "Delete a provider that has no allocations and no children.", {204: None}, errors=(404, 409)
    ),
    (_RP + "/inventories", "GET"): Operation(
        "List the provider's inventories.", {200: r.INVENTORIES}, errors=(404,), cached=True
    ),
    (_RP + "/inventories", "POST"): Operation(
        "Add one inventory to the provider.",
        {201: r.INVENTORY},
        errors=(404, 409),
        body=_one(inv_s.POST_V),
    ),
    (_RP + "/inventories", "PUT"): Operation(
        "Replace all of the provider's inventories.",
        {200: r.INVENTORIES},
        errors=(404, 409),
        body=_one(inv_s.PUT_ALL_V),
        links={
            200: {
                "GetUsages": _link("GET", _RP + "/usages", _SAME_PROVIDER),
                "GetInventory": _link(
                    "GET",
                    _RP + "/inventories/{resource_class}",
                    {**_SAME_PROVIDER, "resource_class": "VCPU"},
                ),
                # The 1.0 body names the provider in a value, where a link can
                # put it; the consumer is new.
                "Allocate": _link(
                    "PUT",
                    "/allocations/{consumer_uuid}",
                    {
                        "consumer_uuid": "7e57c0de-0000-4000-8000-000000000001",
                        "header.OpenStack-API-Version": "placement 1.0",
                    },
                    {
                        "allocations": [
                            {
                                "resource_provider": {"uuid": "$request.path.uuid"},
                                "resources": {"VCPU": 1},
                            }
                        ]
                    },
                ),
            }
        },
    ),
    (_RP + "/inventories", "DELETE"): Operation(
        "Delete all of the provider's inventories (1.5).", {204: None}, errors=(404, 409)
    ),
    (_RP + "/inventories/{resource_class}", "GET"): Operation(
        "Show one inventory.", {200: r.INVENTORY}, errors=(404,), cached=True
    ),
    (_RP + "/inventories/{resource_class}", "PUT"): Operation(
        "Update one inventory.", {200: r.INVENTORY}, errors=(404, 409), body=_one(inv_s.PUT_ONE_V)
    ),
    (_RP + "/inventories/{resource_class}", "DELETE"): Operation(
        "Delete one inventory.", {204: None}, errors=(404, 409)
    ),
    (_RP + "/usages", "GET"): Operation(
        "The provider's usage per resource class.",
        {200: r.PROVIDER_USAGES},
        errors=(404,),
        cached=True,
    ),
    (_RP + "/aggregates", "GET"): Operation(
        "The provider's aggregates.", {200: r.AGGREGATES}, errors=(404,), cached=True
    ),
    (_RP + "/aggregates", "PUT"): Operation(
        "Replace the provider's aggregates (with its generation from 1.19).",
        {200: r.AGGREGATES},
        errors=(404, 409),
        cached=True,
        body=agg_s.PUT_BODIES,
    ),
    (_RP + "/allocations", "GET"): Operation(
        "The allocations against the provider, by consumer.",
        {200: r.PROVIDER_ALLOCATIONS},
        errors=(404,),
        cached=True,
    ),
    (_RP + "/traits", "GET"): Operation(
        "The provider's traits.", {200: r.PROVIDER_TRAITS}, errors=(404,), cached=True
    ),
    (_RP + "/traits", "PUT"): Operation(
        "Replace the provider's traits.",
        {200: r.PROVIDER_TRAITS},
        errors=(404, 409),
        cached=True,
        body=_one(trait_s.SET_PROVIDER_TRAITS_V),
    ),
    (_RP + "/traits", "DELETE"): Operation(
        "Remove all of the provider's traits.", {204: None}, errors=(404, 409)
    ),
    ("/resource_classes", "GET"): Operation(
        "List resource classes, standard and custom.", {200: r.RESOURCE_CLASSES}, cached=True
    ),
    ("/resource_classes", "POST"): Operation(
        "Create a custom resource class.", {201: None}, errors=(409,), body=_one(rc_s.NAME_BODY_V)
    ),
    ("/resource_classes/{name}", "GET"): Operation(
        "Show one resource class.", {200: r.RESOURCE_CLASS}, errors=(404,), cached=True
    ),
    ("/resource_classes/{name}", "PUT"): Operation(
        "Before 1.7, rename a custom class (body: the new name); from 1.7, "
        "create it if absent (201) or confirm it (204), without a body.",
        {200: r.RESOURCE_CLASS, 201: None, 204: None},
        errors=(404, 409),
        body=(("1.2", rc_s.NAME_BODY_V), ("1.7", IGNORED)),
    ),
    ("/resource_classes/{name}", "DELETE"): Operation(
        "Delete a custom class nobody uses.", {204: None}, errors=(404, 409)
    ),
    ("/allocations", "POST"): Operation(
        "Write the allocations of several consumers in one transaction.",
        {204: None},
        errors=(409,),
        body=alloc_s.POST_SCHEMAS,
    ),
    ("/allocations/{consumer_uuid}", "GET"): Operation(
        "A consumer's allocations (an empty object when it has none).",
        {200: r.CONSUMER_ALLOCATIONS},
        cached=True,
    ),
    ("/allocations/{consumer_uuid}", "PUT"): Operation(
        "Replace a consumer's allocations (with its generation from 1.28).",
        {204: None},
        errors=(409,),
        body=alloc_s.PUT_SCHEMAS,
        links={
            204: {
                "GetAllocations": _link("GET", "/allocations/{consumer_uuid}", _SAME_CONSUMER),
                "DeleteAllocations": _link(
                    "DELETE", "/allocations/{consumer_uuid}", _SAME_CONSUMER
                ),
            }
        },
    ),
    ("/allocations/{consumer_uuid}", "DELETE"): Operation(
        "Remove all of a consumer's allocations.", {204: None}, errors=(404, 409)
    ),
    ("/allocation_candidates", "GET"): Operation(
        "Where a request fits: allocation requests and provider "
        "summaries. Request groups take a suffix from 1.25 (resources1, "
        "required1, member_of1, in_tree1; any 1-64 of [a-zA-Z0-9_-] from "
        "1.33).",
        {200: r.CANDIDATES},
        cached=True,
        query=cand_s.SCHEMAS,
    ),
    ("/traits", "GET"): Operation(
        "List traits, filtered by name (in:A,B or startswith:P) and by "
        "whether a provider has them.",
        {200: r.TRAITS},
        cached=True,
        query=_one(trait_s.LIST_QUERY_V),
    ),
    ("/traits/{name}", "GET"): Operation("Whether a trait exists.", {204: None}, errors=(404,)),
    ("/traits/{name}", "PUT"): Operation(
        "Create a custom trait (201) or confirm it exists (204).", {201: None, 204: None}
    ),
    ("/traits/{name}", "DELETE"): Operation(
        "Delete a custom trait no provider has.", {204: None}, errors=(404, 409)
    ),
    ("/usages", "GET"): Operation(
        "A project's (and optionally a user's) usage; by consumer type from 1.38.",
        {200: r.USAGES},
        cached=True,
        query=usage_s.QUERIES,
    ),
    ("/reshaper", "POST"): Operation(
        "Move inventories and allocations between providers in one transaction.",
        {204: None},
        errors=(409,),
        body=reshaper_s.SCHEMAS,
    ),
    # Berth's own operations.
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
        query=_one(_WATCH_QUERY),
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
