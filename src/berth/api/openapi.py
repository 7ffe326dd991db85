"""The OpenAPI 3.1 document of the whole API, served at ``/openapi.json``.

Built from two tables: the routes table (``berth.api.routes.ROUTES``, the
where: every path, method and the microversion a route starts at) and
``OPERATIONS`` below (the what: a summary, the success answers, the
request schemas and the errors). Request schemas are the very validators
the handlers use, imported, never copied; response schemas live in
``berth.api.schemas.responses``. A route added to the table without an
entry here fails ``tests/unit/test_openapi.py``.

Microversions: each operation carries ``x-openstack-microversion``
(``min``, ``max``), and a body or query whose schema changes with the
microversion is described as ``anyOf`` one schema per range, each titled
with its range.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import jsonschema

import berth
from berth.api import microversion, util
from berth.api.schemas import aggregate as agg_s
from berth.api.schemas import allocation as alloc_s
from berth.api.schemas import allocation_candidate as cand_s
from berth.api.schemas import inventory as inv_s
from berth.api.schemas import reshaper as reshaper_s
from berth.api.schemas import resource_class as rc_s
from berth.api.schemas import resource_provider as rp_s
from berth.api.schemas import responses as r
from berth.api.schemas import trait as trait_s
from berth.api.schemas import usage as usage_s

Version = tuple[int, int]
#: Schemas by the first microversion they apply at.
Versioned = Sequence[tuple[Version, jsonschema.protocols.Validator]]

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


def _v(*pairs: tuple[Version, jsonschema.protocols.Validator]) -> Versioned:
    return pairs


#: A body the handler does not read.
_IGNORED = util.validator({"description": "Not read."})


#: An HTML page's body.
_HTML = {"text/html": {"schema": {"type": "string"}}}


def _one(schema: jsonschema.protocols.Validator) -> Versioned:
    return (((1, 0), schema),)


_RP = "/resource_providers/{uuid}"
_NEW_PROVIDER = {"uuid": "$response.body#/uuid"}
_SAME_PROVIDER = {"uuid": "$request.path.uuid"}
_SAME_CONSUMER = {"consumer_uuid": "$request.path.consumer_uuid"}


def _operation_id(method: str, path: str) -> str:
    words = [w.strip("{}") for w in path.strip("/").split("/") if w]
    return "_".join([method.lower()] + (words or ["root"])).replace(".", "_")


def _link(method: str, path: str, parameters: dict[str, str],
          body: Any = None) -> dict[str, Any]:
    """An OpenAPI link to ``method path`` (stateful test tools follow
    these: a new provider's uuid feeds its inventories, and so on)."""
    link: dict[str, Any] = {"operationId": _operation_id(method, path),
                            "parameters": parameters}
    if body is not None:
        link["requestBody"] = body
    return link

#: (path, method) -> Operation. The lead adds an entry with each new route.
OPERATIONS: dict[tuple[str, str], Operation] = {
    ("/", "GET"): Operation(
        "Version discovery: the microversions this server speaks.",
        {200: r.VERSIONS}, public=True),
    ("/openapi.json", "GET"): Operation(
        "This document: the whole API as OpenAPI 3.1.",
        {200: {"type": "object"}}, public=True),
    ("/resource_providers", "GET"): Operation(
        "List resource providers, filtered by name, uuid, tree, "
        "aggregates, traits and available resources.",
        {200: r.PROVIDERS}, cached=True,
        query=_v(*[(v, rp_s.list_query(v)) for v in
                   ((1, 0), (1, 3), (1, 4), (1, 14), (1, 18))])),
    ("/resource_providers", "POST"): Operation(
        "Create a resource provider (201 without a body before 1.20, "
        "200 with the provider from 1.20).",
        {200: r.PROVIDER, 201: None}, errors=(409,), cached=True,
        body=_v(((1, 0), rp_s.POST_PROVIDER),
                ((1, 14), rp_s.POST_PROVIDER_1_14)),
        links={200: {
            "SetInventories": _link("PUT", _RP + "/inventories",
                                    _NEW_PROVIDER),
            "AddInventory": _link("POST", _RP + "/inventories",
                                  _NEW_PROVIDER),
            "SetTraits": _link("PUT", _RP + "/traits", _NEW_PROVIDER),
            "SetAggregates": _link("PUT", _RP + "/aggregates",
                                   _NEW_PROVIDER),
            "GetProvider": _link("GET", _RP, _NEW_PROVIDER)}}),
    (_RP, "GET"): Operation(
        "Show one resource provider.", {200: r.PROVIDER}, errors=(404,),
        cached=True),
    (_RP, "PUT"): Operation(
        "Rename a provider or (from 1.14) set its parent; re-parenting "
        "from 1.37.", {200: r.PROVIDER}, errors=(404, 409), cached=True,
        body=_v(((1, 0), rp_s.PUT_PROVIDER),
                ((1, 14), rp_s.PUT_PROVIDER_1_14))),
    (_RP, "DELETE"): Operation(
        "Delete a provider that has no allocations and no children.",
        {204: None}, errors=(404, 409)),
    (_RP + "/inventories", "GET"): Operation(
        "List the provider's inventories.", {200: r.INVENTORIES},
        errors=(404,), cached=True),
    (_RP + "/inventories", "POST"): Operation(
        "Add one inventory to the provider.", {201: r.INVENTORY},
        errors=(404, 409), body=_one(inv_s.POST_V)),
    (_RP + "/inventories", "PUT"): Operation(
        "Replace all of the provider's inventories.", {200: r.INVENTORIES},
        errors=(404, 409), body=_one(inv_s.PUT_ALL_V),
        links={200: {
            "GetUsages": _link("GET", _RP + "/usages", _SAME_PROVIDER),
            "GetInventory": _link(
                "GET", _RP + "/inventories/{resource_class}",
                {**_SAME_PROVIDER, "resource_class": "VCPU"}),
            # The 1.0 body names the provider in a value, where a link can
            # put it; the consumer is new.
            "Allocate": _link(
                "PUT", "/allocations/{consumer_uuid}",
                {"consumer_uuid": "7e57c0de-0000-4000-8000-000000000001",
                 "header.OpenStack-API-Version": "placement 1.0"},
                {"allocations": [{
                    "resource_provider": {"uuid": "$request.path.uuid"},
                    "resources": {"VCPU": 1}}]})}}),
    (_RP + "/inventories", "DELETE"): Operation(
        "Delete all of the provider's inventories (1.5).", {204: None},
        errors=(404, 409)),
    (_RP + "/inventories/{resource_class}", "GET"): Operation(
        "Show one inventory.", {200: r.INVENTORY}, errors=(404,),
        cached=True),
    (_RP + "/inventories/{resource_class}", "PUT"): Operation(
        "Update one inventory.", {200: r.INVENTORY}, errors=(404, 409),
        body=_one(inv_s.PUT_ONE_V)),
    (_RP + "/inventories/{resource_class}", "DELETE"): Operation(
        "Delete one inventory.", {204: None}, errors=(404, 409)),
    (_RP + "/usages", "GET"): Operation(
        "The provider's usage per resource class.", {200: r.PROVIDER_USAGES},
        errors=(404,), cached=True),
    (_RP + "/aggregates", "GET"): Operation(
        "The provider's aggregates.", {200: r.AGGREGATES}, errors=(404,),
        cached=True),
    (_RP + "/aggregates", "PUT"): Operation(
        "Replace the provider's aggregates (with its generation from "
        "1.19).", {200: r.AGGREGATES}, errors=(404, 409), cached=True,
        body=_v(((1, 1), agg_s.PUT_AGGREGATES_1_1),
                ((1, 19), agg_s.PUT_AGGREGATES_1_19))),
    (_RP + "/allocations", "GET"): Operation(
        "The allocations against the provider, by consumer.",
        {200: r.PROVIDER_ALLOCATIONS}, errors=(404,), cached=True),
    (_RP + "/traits", "GET"): Operation(
        "The provider's traits.", {200: r.PROVIDER_TRAITS}, errors=(404,),
        cached=True),
    (_RP + "/traits", "PUT"): Operation(
        "Replace the provider's traits.", {200: r.PROVIDER_TRAITS},
        errors=(404, 409), cached=True,
        body=_one(trait_s.SET_PROVIDER_TRAITS_V)),
    (_RP + "/traits", "DELETE"): Operation(
        "Remove all of the provider's traits.", {204: None},
        errors=(404, 409)),
    ("/resource_classes", "GET"): Operation(
        "List resource classes, standard and custom.",
        {200: r.RESOURCE_CLASSES}, cached=True),
    ("/resource_classes", "POST"): Operation(
        "Create a custom resource class.", {201: None}, errors=(409,),
        body=_one(rc_s.NAME_BODY_V)),
    ("/resource_classes/{name}", "GET"): Operation(
        "Show one resource class.", {200: r.RESOURCE_CLASS}, errors=(404,),
        cached=True),
    ("/resource_classes/{name}", "PUT"): Operation(
        "Before 1.7, rename a custom class (body: the new name); from 1.7, "
        "create it if absent (201) or confirm it (204), without a body.",
        {200: r.RESOURCE_CLASS, 201: None, 204: None}, errors=(404, 409),
        body=_v(((1, 2), rc_s.NAME_BODY_V), ((1, 7), _IGNORED))),
    ("/resource_classes/{name}", "DELETE"): Operation(
        "Delete a custom class nobody uses.", {204: None},
        errors=(404, 409)),
    ("/allocations", "POST"): Operation(
        "Write the allocations of several consumers in one transaction.",
        {204: None}, errors=(409,),
        body=alloc_s.POST_SCHEMAS),
    ("/allocations/{consumer_uuid}", "GET"): Operation(
        "A consumer's allocations (an empty object when it has none).",
        {200: r.CONSUMER_ALLOCATIONS}, cached=True),
    ("/allocations/{consumer_uuid}", "PUT"): Operation(
        "Replace a consumer's allocations (with its generation from 1.28).",
        {204: None}, errors=(409,), body=alloc_s.PUT_SCHEMAS,
        links={204: {
            "GetAllocations": _link("GET", "/allocations/{consumer_uuid}",
                                    _SAME_CONSUMER),
            "DeleteAllocations": _link("DELETE",
                                       "/allocations/{consumer_uuid}",
                                       _SAME_CONSUMER)}}),
    ("/allocations/{consumer_uuid}", "DELETE"): Operation(
        "Remove all of a consumer's allocations.", {204: None},
        errors=(404, 409)),
    ("/allocation_candidates", "GET"): Operation(
        "Where a request fits: allocation requests and provider "
        "summaries. Request groups take a suffix from 1.25 (resources1, "
        "required1, member_of1, in_tree1; any 1-64 of [a-zA-Z0-9_-] from "
        "1.33).", {200: r.CANDIDATES}, cached=True,
        query=cand_s.SCHEMAS),
    ("/traits", "GET"): Operation(
        "List traits, filtered by name (in:A,B or startswith:P) and by "
        "whether a provider has them.", {200: r.TRAITS}, cached=True,
        query=_one(trait_s.LIST_QUERY_V)),
    ("/traits/{name}", "GET"): Operation(
        "Whether a trait exists.", {204: None}, errors=(404,)),
    ("/traits/{name}", "PUT"): Operation(
        "Create a custom trait (201) or confirm it exists (204).",
        {201: None, 204: None}),
    ("/traits/{name}", "DELETE"): Operation(
        "Delete a custom trait no provider has.", {204: None},
        errors=(404, 409)),
    ("/usages", "GET"): Operation(
        "A project's (and optionally a user's) usage; by consumer type "
        "from 1.38.", {200: r.USAGES}, cached=True,
        query=_v(((1, 9), usage_s.USAGES_1_9),
                 ((1, 38), usage_s.USAGES_1_38))),
    ("/reshaper", "POST"): Operation(
        "Move inventories and allocations between providers in one "
        "transaction.", {204: None}, errors=(409,),
        body=reshaper_s.SCHEMAS),
    # Berth's own operations.
    ("/healthcheck", "GET"): Operation(
        "Health (oslo.middleware's healthcheck): 200 when the database "
        "answers, 503 when not. Without a token the plain answer; the "
        "details (backend, latency, cache lag) need policy "
        "berth:healthcheck:details.", {200: {"type": "string"}},
        errors=(503,), public=True, media={
            "text/plain": {"schema": {"type": "string"}},
            JSON: {"schema": {"type": "object"}}}),
    ("/healthcheck", "HEAD"): Operation(
        "Health without a body: 204 when the database answers, 503 when "
        "not.", {204: None}, errors=(503,), public=True),
    ("/berth/explain/allocation_candidates", "GET"): Operation(
        "Why trees give no allocation candidate for this "
        "allocation-candidates query: trees considered, dropped per "
        "reason, examples (policy berth:explain, admin).",
        {200: {"type": "object"}}, errors=(404,), query=cand_s.SCHEMAS,
        description="Takes the same query as GET /allocation_candidates, "
        "plus `explain_tree=<provider uuid>` for the exact reasons of one "
        "tree (404 when no provider has that uuid). See "
        "docs/explain-and-fit.md."),
    ("/berth/fit", "GET"): Operation(
        "How many more copies of this allocation-candidates query fit, in "
        "total, per tree and per aggregate, with an upper bound (policy "
        "berth:fit, admin).", {200: {"type": "object"}},
        query=cand_s.SCHEMAS,
        description="See docs/explain-and-fit.md for how the count and "
        "the bound are worked out."),
    # The dashboard (docs/dashboard.md): HTML for browsers, policy
    # berth:dashboard (admin); under noauth2 a browser's request without
    # a token stands for admin.
    ("/dashboard", "GET"): Operation(
        "Dashboard overview: capacity, used and free per resource class, "
        "cloud-wide and per aggregate, and the fullest providers (HTML; "
        "304 while the change sequence has not moved).",
        {200: {"type": "string"}}, errors=(304,), media=_HTML,
        description="Query: `page`.", token_optional=True),
    ("/dashboard/providers", "GET"): Operation(
        "Dashboard provider trees: search by name, uuid, trait or "
        "aggregate (HTML).", {200: {"type": "string"}}, errors=(304,),
        media=_HTML, description="Query: `by`, `q`, `page`.", token_optional=True),
    ("/dashboard/consumers", "GET"): Operation(
        "Dashboard consumers: allocations by consumer, project, user or "
        "consumer type (HTML).", {200: {"type": "string"}},
        errors=(304,), media=_HTML, description="Query: `view`, `page`.", token_optional=True),
    ("/dashboard/explain", "GET"): Operation(
        "Dashboard explain form: why trees give no candidate for an "
        "allocation-candidates query (HTML).", {200: {"type": "string"}},
        media=_HTML, description="Query: `q`, the allocation-candidates "
        "query string.", token_optional=True),
    ("/dashboard/fit", "GET"): Operation(
        "Dashboard fit form: how many more copies of a request fit "
        "(HTML).", {200: {"type": "string"}}, media=_HTML,
        description="Query: `q`, the allocation-candidates query string.", token_optional=True),
    ("/dashboard/seq", "GET"): Operation(
        "The change-sequence number the dashboard polls to refresh "
        "(plain text).", {200: {"type": "string"}},
        media={"text/plain": {"schema": {"type": "string"}}}, token_optional=True),
    ("/dashboard/static/{name}", "GET"): Operation(
        "A file the dashboard ships (its stylesheet); no token needed.",
        {200: {"type": "string"}}, errors=(404,), public=True,
        media={"text/css": {"schema": {"type": "string"}}}),
    ("/metrics", "GET"): Operation(
        "Every worker's Prometheus metrics in the text format (policy "
        "berth:metrics:show, admin).", {200: {"type": "string"}},
        media={"text/plain": {"schema": {"type": "string"}}}),
}

#: Statuses any authenticated operation may answer.
COMMON_ERRORS = (400, 401, 403, 405, 406, 413, 414, 415, 431, 503)

ERROR_TEXT = {
    400: "Bad request: malformed JSON, a value out of bounds, a body or "
         "query the schema refuses, or a malformed microversion header.",
    401: "No valid token.",
    403: "Policy does not allow the caller to do this.",
    404: "No such resource, or the route needs a later microversion.",
    405: "Method not allowed (some routes answer 405 below their "
         "microversion).",
    406: "Microversion out of range, or an Accept header without JSON.",
    409: "Conflict: a generation changed, a name exists, or capacity is "
         "exceeded; the code field says which.",
    304: "Not modified: the page's ETag (the change sequence) still "
         "holds.",
    413: "Request body too large.",
    414: "URL too long.",
    415: "Request body not declared as application/json.",
    431: "Request headers too large.",
    503: "The database or the identity service (Keystone) cannot be "
         "reached just now; try again.",
}


def _ver(v: Version) -> str:
    return "%d.%d" % v


def _minimum(spec: Any) -> str:
    if isinstance(spec, tuple):
        return str(spec[1])
    return microversion.VERSIONS[0]


def _ranges(schemas: Versioned) -> list[tuple[str, dict[str, Any]]]:
    """(``"1.x - 1.y"``, schema) per range, oldest first."""
    ordered = sorted(schemas, key=lambda pair: pair[0])
    out = []
    for i, (since, validator) in enumerate(ordered):
        last = (microversion.VERSIONS[-1] if i + 1 == len(ordered) else
                _previous(ordered[i + 1][0]))
        out.append(("%s - %s" % (_ver(since), last),
                    dict(validator.schema)))  # type: ignore[arg-type]
    return out


def _previous(v: Version) -> str:
    index = microversion.VERSIONS.index(_ver(v))
    return microversion.VERSIONS[index - 1]


def _combined(schemas: Versioned) -> dict[str, Any]:
    ranges = _ranges(schemas)
    if len(ranges) == 1:
        return ranges[0][1]
    return {"anyOf": [{**schema, "title": "microversions " + label}
                      for label, schema in ranges]}


def _query_parameters(schemas: Versioned) -> list[dict[str, Any]]:
    """One parameter per query key any microversion accepts; suffixed
    group keys (patternProperties) appear under their plain name."""
    found: dict[str, dict[str, Any]] = {}
    since: dict[str, str] = {}
    for label, schema in _ranges(schemas):
        keys = dict(schema.get("properties", {}))
        for pattern, spec in schema.get("patternProperties", {}).items():
            keys[pattern.lstrip("^").split("(")[0]] = spec
        for name, spec in keys.items():
            found[name] = spec
            since.setdefault(name, label.split(" ")[0])
    return [{"name": name, "in": "query", "required": False,
             "schema": {"type": "string"}
             if spec.get("type") != "string" else spec,
             "description": "From microversion %s." % since[name]}
            for name, spec in sorted(found.items())]


def _path_parameters(template: str) -> list[dict[str, Any]]:
    names = [part[1:-1] for part in template.split("/")
             if part.startswith("{")]
    return [{"name": n, "in": "path", "required": True,
             "schema": {"type": "string"}} for n in names]


def _headers(cached: bool) -> dict[str, Any]:
    headers = {"OpenStack-API-Version": {"$ref": "#/components/headers/"
                                         "OpenStack-API-Version"},
               "x-openstack-request-id": {"$ref": "#/components/headers/"
                                          "x-openstack-request-id"}}
    if cached:
        headers["last-modified"] = {"$ref": "#/components/headers/"
                                    "last-modified"}
        headers["cache-control"] = {"$ref": "#/components/headers/"
                                    "cache-control"}
    return headers


def _success(op: Operation) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for status, schema in sorted(op.ok.items()):
        reply: dict[str, Any] = {
            "description": "Success.",
            "headers": _headers(op.cached and schema is not None)}
        if op.media is not None and schema is not None:
            reply["content"] = copy.deepcopy(op.media)
        elif schema is not None:
            reply["content"] = {JSON: {"schema": copy.deepcopy(schema)}}
        if status in op.links:
            reply["links"] = op.links[status]
        out[str(status)] = reply
    return out


def _operation(template: str, method: str, spec: Any) -> dict[str, Any]:
    op = OPERATIONS[(template, method)]
    low = _minimum(spec)
    doc: dict[str, Any] = {
        "operationId": _operation_id(method, template),
        "summary": op.summary,
        "x-openstack-microversion": {"min": low,
                                     "max": microversion.VERSIONS[-1]},
        "parameters": (_path_parameters(template)
                       + [{"$ref": "#/components/parameters/ApiVersion"}]
                       + _query_parameters(op.query)),
        "responses": _success(op),
    }
    if op.description:
        doc["description"] = op.description
    statuses = set(op.errors) | ({400, 406} if op.public
                                 else set(COMMON_ERRORS))
    if isinstance(spec, tuple):  # below its microversion: 404 (or 405)
        statuses.add(spec[2] if len(spec) > 2 else 404)
    for status in sorted(statuses):
        if status == 304:  # no body
            doc["responses"]["304"] = {"description": ERROR_TEXT[304]}
            continue
        doc["responses"][str(status)] = {
            "$ref": "#/components/responses/E%d" % status}
    doc["responses"]["default"] = {"$ref": "#/components/responses/Error"}
    if op.body:
        # Required unless some microversion range does not read it.
        doc["requestBody"] = {
            "required": all(v is not _IGNORED for _, v in op.body),
            "content": {JSON: {"schema": _combined(op.body)}}}
    if op.public:
        doc["security"] = []
    elif op.token_optional:
        doc["security"] = [{"token": []}, {}]
    return doc


def _components() -> dict[str, Any]:
    def error(text: str) -> dict[str, Any]:
        return {"description": text, "headers": _headers(False),
                "content": {JSON: {"schema": {
                    "$ref": "#/components/schemas/Error"}}}}
    responses = {"E%d" % s: error(t) for s, t in ERROR_TEXT.items()
                 if s != 304}
    responses["Error"] = error("Any other error, in the same format.")
    return {
        "schemas": {"Error": r.ERROR},
        "responses": responses,
        "parameters": {"ApiVersion": {
            "name": "OpenStack-API-Version", "in": "header",
            "required": False,
            "description": "The microversion wanted, as `placement 1.39` "
                           "or `placement latest`; 1.0 without it, or when "
                           "the value names another service. A malformed "
                           "placement version is a 400, one out of range "
                           "a 406.",
            "schema": {"type": "string"},
            "examples": {"v%s" % v.replace(".", "_"): {
                "value": "placement %s" % v}
                for v in microversion.VERSIONS}}},
        "headers": {
            "OpenStack-API-Version": {
                "description": "The microversion that answered, as "
                               "`placement 1.39`.",
                "schema": {"type": "string"}},
            "x-openstack-request-id": {
                "description": "This request's id (`req-` and a uuid), "
                               "also in the server log.",
                "schema": {"type": "string"}},
            "last-modified": {
                "description": "From 1.15: when the answer last changed.",
                "schema": {"type": "string"}},
            "cache-control": {
                "description": "From 1.15: always `no-cache`.",
                "schema": {"type": "string"}}},
        "securitySchemes": {"token": {
            "type": "apiKey", "in": "header", "name": "X-Auth-Token",
            "description": "A Keystone token (or `admin` under noauth2)."}},
    }


def document(routes: dict[str, dict[str, Any]] | None = None
             ) -> dict[str, Any]:
    """The OpenAPI document for ``routes`` (the routes table by default).

    KeyError names a route with no entry in ``OPERATIONS``.
    """
    if routes is None:
        from berth.api.routes import ROUTES
        routes = ROUTES
    paths: dict[str, Any] = {}
    for template, methods in routes.items():
        paths[template] = {
            method.lower(): _operation(template, method, spec)
            for method, spec in methods.items()}
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Berth (OpenStack Placement API)",
            "version": berth.__version__,
            "description": "The Placement HTTP API, microversions %s to %s."
                           " Errors use the Placement format (see the "
                           "Error schema); `code` appears from 1.23."
                           % (microversion.VERSIONS[0],
                              microversion.VERSIONS[-1])},
        "security": [{"token": []}],
        "paths": paths,
        "components": _components(),
    }
