"""Handlers for /traits, /traits/{name} and
/resource_providers/{uuid}/traits (1.6+)."""

from __future__ import annotations

import re
from typing import Any

import falcon

from berth.api import util
from berth.api.errors import HTTPProblem
from berth.api.schemas import trait as schema
from berth.domain import trait

POLICY = "placement:traits:%s"
PROVIDER_TRAITS_POLICY = "placement:resource_providers:traits:%s"

INVALID_TRAIT = (
    "The trait is invalid. A valid trait must be no longer than "
    '255 characters, start with the prefix "CUSTOM_" and use '
    'following characters: "A"-"Z", "0"-"9" and "_"'
)
_CUSTOM_RE = re.compile("CUSTOM_[A-Z0-9_]+")


def _listing(found: list[trait.Trait]) -> tuple[dict[str, Any], Any]:
    return ({"traits": [tr.name for tr in found]}, util.newest(tr.modified for tr in found))


def _filters(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """GET /traits filters from the query string, as upstream reads them
    (the last value of a repeated key wins)."""
    query = util.query_dict(pairs)
    filters: dict[str, Any] = {}
    if "name" in query:
        op, sep, value = query["name"].partition(":")
        if not sep:
            raise HTTPProblem(
                400,
                "Badly formatted name parameter. Expected name query "
                "string parameter in form: ?name=[in|startswith]:"
                '[name1,name2|prefix]. Got: "%s"' % query["name"],
            )
        # Any other operator filters nothing, as upstream.
        if op == "in":
            filters["names"] = value.split(",")
        elif op == "startswith":
            filters["prefix"] = value
    if "associated" in query:
        flag = query["associated"].lower()
        if flag not in ("true", "false"):
            raise HTTPProblem(
                400, 'The query parameter "associated" only accepts "true" or "false"'
            )
        filters["associated"] = flag == "true"
    return filters


def list_traits(req: falcon.Request, resp: falcon.Response) -> None:
    """200 with the names of the traits the filters select; 400 for a
    query the schema refuses or a malformed ``name`` or ``associated``;
    403 unless policy allows the caller; 406 when the client cannot take
    JSON."""
    util.check_accept(req)
    util.authorize(req, POLICY % "list")
    filters = _filters(util.validate_query(req, schema.LIST_QUERY_V))
    found = util.db(req).read(lambda conn: trait.list_traits(conn, **filters))
    body, when = _listing(found)
    util.send(req, resp, body, last_modified=when)


def get_trait(req: falcon.Request, resp: falcon.Response, name: str) -> None:
    """204 when the trait exists; 403 unless policy allows the caller;
    404 when it does not."""
    util.authorize(req, POLICY % "show")
    found = util.db(req).read(lambda conn: trait.get_trait(conn, name))
    util.no_content(resp)
    util.cache_headers(req, resp, found.modified)


def put_trait(req: falcon.Request, resp: falcon.Response, name: str) -> None:
    """201 when the custom trait was created, 204 when it existed (both
    with its location); 400 when the name is not a custom trait's; 403
    unless policy allows the caller."""
    util.authorize(req, POLICY % "update")
    # fullmatch: the schema's "$" would let a final newline through.
    if not schema.CUSTOM_TRAIT_V.is_valid(name) or _CUSTOM_RE.fullmatch(name) is None:
        raise HTTPProblem(400, INVALID_TRAIT)
    created, found = util.db(req).run(lambda conn: trait.ensure_trait(conn, name))
    util.no_content(resp)
    resp.status = 201 if created else 204
    resp.location = req.prefix + "/traits/" + name
    util.cache_headers(req, resp, found.modified)


def delete_trait(req: falcon.Request, resp: falcon.Response, name: str) -> None:
    """204; 400 for a standard trait; 403 unless policy allows the
    caller; 404 when there is no such trait; 409 when a provider has it."""
    util.authorize(req, POLICY % "delete")
    util.db(req).run(lambda conn: trait.delete_trait(conn, name))
    util.no_content(resp)


def list_provider_traits(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    """200 with the provider's traits and generation; 403 unless
    policy allows the caller; 404 when no provider has that uuid; 406
    when the client cannot take JSON."""
    util.check_accept(req)
    util.authorize(req, PROVIDER_TRAITS_POLICY % "list")
    generation, found = util.db(req).read(lambda conn: trait.provider_traits(conn, uuid))
    body, when = _listing(found)
    body["resource_provider_generation"] = generation
    util.send(req, resp, body, last_modified=when)


def set_provider_traits(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    """200 with the traits and the new generation; 400 for a body
    the schema refuses or an unknown trait; 403 unless policy allows the
    caller; 404 when no provider has that uuid; 409 when the generation
    is stale; 415 unless the body is JSON."""
    util.require_json(req)
    util.authorize(req, PROVIDER_TRAITS_POLICY % "update")
    data = util.json_body(req, schema.SET_PROVIDER_TRAITS_V)
    generation, found = util.db(req).run(
        lambda conn: trait.set_provider_traits(
            conn, uuid, data["resource_provider_generation"], data["traits"]
        )
    )
    body, when = _listing(found)
    body["resource_provider_generation"] = generation
    util.send(req, resp, body, last_modified=when)


def delete_provider_traits(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    """204; 403 unless policy allows the caller; 404 when no
    provider has that uuid; 409 when the provider changed meanwhile."""
    util.authorize(req, PROVIDER_TRAITS_POLICY % "delete")
    util.db(req).run(lambda conn: trait.delete_provider_traits(conn, uuid))
    util.no_content(resp)
