"""The parts of the OpenAPI document every operation shares: the error
answers (``ERROR_TEXT``, and ``COMMON_ERRORS`` any authenticated
operation may give), the response headers, the microversion header
parameter and the token's security scheme (``components``)."""

from __future__ import annotations

from typing import Any

from berth.api import microversion
from berth.api.render import JSON
from berth.api.schemas import responses as r

#: Statuses any authenticated operation may answer.
COMMON_ERRORS = (400, 401, 403, 405, 406, 413, 414, 415, 431, 503)

#: What each error status means, for every operation that answers it.
ERROR_TEXT = {
    400: "Bad request: malformed JSON, a value out of bounds, a body or "
    "query the schema refuses, or a malformed microversion header.",
    401: "No valid token.",
    403: "Policy does not allow the caller to do this.",
    404: "No such resource, or the route needs a later microversion.",
    405: "Method not allowed (some routes answer 405 below their microversion).",
    406: "Microversion out of range, or an Accept header without JSON.",
    409: "Conflict: a generation changed, a name exists, or capacity is "
    "exceeded; the code field says which.",
    304: "Not modified: the page's ETag (the change sequence) still holds.",
    410: "Gone: the change feed no longer keeps the events after that "
    "position (the error's oldest_position says which it keeps), or "
    "the position is ahead of the database (a restored backup); "
    "list again.",
    413: "Request body too large.",
    414: "URL too long.",
    415: "Request body not declared as application/json.",
    431: "Request headers too large.",
    503: "The database or the identity service (Keystone) cannot be reached just now; try again.",
}


def headers(*, cached: bool, read: bool = False) -> dict[str, Any]:
    """References to the headers an answer carries (``cached``: with
    ``last-modified`` and ``cache-control``; ``read``: the answer of a
    GET or HEAD, with ``Berth-Position``)."""
    headers = {
        "OpenStack-API-Version": {"$ref": "#/components/headers/OpenStack-API-Version"},
        "x-openstack-request-id": {"$ref": "#/components/headers/x-openstack-request-id"},
    }
    if cached:
        headers["last-modified"] = {"$ref": "#/components/headers/last-modified"}
        headers["cache-control"] = {"$ref": "#/components/headers/cache-control"}
    if read:
        headers["Berth-Position"] = {"$ref": "#/components/headers/Berth-Position"}
    return headers


def components() -> dict[str, Any]:
    """The document's ``components``: what the operations refer to."""

    def error(text: str) -> dict[str, Any]:
        return {
            "description": text,
            "headers": headers(cached=False),
            "content": {JSON: {"schema": {"$ref": "#/components/schemas/Error"}}},
        }

    responses = {"E%d" % s: error(t) for s, t in ERROR_TEXT.items() if s != 304}
    responses["Error"] = error("Any other error, in the same format.")
    return {
        "schemas": {"Error": r.ERROR},
        "responses": responses,
        "parameters": {
            "ApiVersion": {
                "name": "OpenStack-API-Version",
                "in": "header",
                "required": False,
                "description": "The microversion wanted, as `placement 1.39` "
                "or `placement latest`; 1.0 without it, or when "
                "the value names another service. A malformed "
                "placement version is a 400, one out of range "
                "a 406.",
                "schema": {"type": "string"},
                "examples": {
                    "v%s" % v.replace(".", "_"): {"value": "placement %s" % v}
                    for v in microversion.VERSIONS
                },
            }
        },
        "headers": {
            "OpenStack-API-Version": {
                "description": "The microversion that answered, as `placement 1.39`.",
                "schema": {"type": "string"},
            },
            "x-openstack-request-id": {
                "description": "This request's id (`req-` and a uuid), also in the server log.",
                "schema": {"type": "string"},
            },
            "last-modified": {
                "description": "From 1.15: when the answer last changed.",
                "schema": {"type": "string"},
            },
            "cache-control": {
                "description": "From 1.15: always `no-cache`.",
                "schema": {"type": "string"},
            },
            "Berth-Position": {
                "description": "On every read (any microversion): the "
                "position of the change sequence the answer "
                "reflects at least, as `slot:number` pairs "
                "(`0` before the first write); read on from "
                "it with `GET /berth/changes?after=` (see "
                "docs/change-feed.md). Absent when the "
                "database could not say.",
                "schema": {"type": "string", "pattern": "^(0|[0-9]+:[0-9]+(,[0-9]+:[0-9]+)*)$"},
                "example": "1:4711",
            },
        },
        "securitySchemes": {
            "token": {
                "type": "apiKey",
                "in": "header",
                "name": "X-Auth-Token",
                "description": "A Keystone token (or `admin` under noauth2).",
            }
        },
    }
