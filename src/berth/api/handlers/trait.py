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
RP_POLICY = "placement:resource_providers:traits:%s"

INVALID_TRAIT = ('The trait is invalid. A valid trait must be no longer than '
                 '255 characters, start with the prefix "CUSTOM_" and use '
                 'following characters: "A"-"Z", "0"-"9" and "_"')
_CUSTOM_RE = re.compile("CUSTOM_[A-Z0-9_]+")


def _listing(found: list[trait.Trait]) -> tuple[dict[str, Any], Any]:
    return ({"traits": [tr.name for tr in found]},
            util.newest(tr.modified for tr in found))


def _filters(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """GET /traits filters from the query string, as upstream reads them
    (the last value of a repeated key wins)."""
    query = util.query_dict(pairs)
    filters: dict[str, Any] = {}
    if "name" in query:
        op, sep, value = query["name"].partition(":")
        if not sep:
            raise HTTPProblem(
                400, 'Badly formatted name parameter. Expected name query '
                'string parameter in form: ?name=[in|startswith]:'
                '[name1,name2|prefix]. Got: "%s"' % query["name"])
        # Any other operator filters nothing, as upstream.
        if op == "in":
            filters["names"] = value.split(",")
        elif op == "startswith":
            filters["prefix"] = value
    if "associated" in query:
        flag = query["associated"].lower()
        if flag not in ("true", "false"):
            raise HTTPProblem(400, 'The query parameter "associated" only '
                              'accepts "true" or "false"')
        filters["associated"] = flag == "true"
    return filters


def list_traits(req: falcon.Request, resp: falcon.Response) -> None:
    util.check_accept(req)
    util.authorize(req, POLICY % "list")
    filters = _filters(util.validate_query(req, schema.LIST_QUERY_V))
    found = util.db(req).read(lambda conn: trait.list_traits(conn, **filters))
    body, when = _listing(found)
    util.send(req, resp, body, last_modified=when)


def get_trait(req: falcon.Request, resp: falcon.Response, name: str) -> None:
    util.authorize(req, POLICY % "show")
    found = util.db(req).read(lambda conn: trait.get_trait(conn, name))
    util.no_content(resp)
    util.cache_headers(req, resp, found.modified)


def put_trait(req: falcon.Request, resp: falcon.Response, name: str) -> None:
    util.authorize(req, POLICY % "update")
    # fullmatch: the schema's "$" would let a final newline through.
    if (not schema.CUSTOM_TRAIT_V.is_valid(name)
            or _CUSTOM_RE.fullmatch(name) is None):
        raise HTTPProblem(400, INVALID_TRAIT)
    created, found = util.db(req).run(
        lambda conn: trait.ensure_trait(conn, name))
    util.no_content(resp)
    resp.status = 201 if created else 204
    resp.location = req.prefix + "/traits/" + name
    util.cache_headers(req, resp, found.modified)


def delete_trait(req: falcon.Request, resp: falcon.Response,
                 name: str) -> None:
    util.authorize(req, POLICY % "delete")
    util.db(req).run(lambda conn: trait.delete_trait(conn, name))
    util.no_content(resp)


def list_provider_traits(req: falcon.Request, resp: falcon.Response,
                         uuid: str) -> None:
    util.check_accept(req)
    util.authorize(req, RP_POLICY % "list")
    generation, found = util.db(req).read(
        lambda conn: trait.provider_traits(conn, uuid))
    body, when = _listing(found)
    body["resource_provider_generation"] = generation
    util.send(req, resp, body, last_modified=when)


def set_provider_traits(req: falcon.Request, resp: falcon.Response,
                        uuid: str) -> None:
    util.require_json(req)
    util.authorize(req, RP_POLICY % "update")
    data = util.json_body(req, schema.SET_PROVIDER_TRAITS_V)
    generation, found = util.db(req).run(
        lambda conn: trait.set_provider_traits(
            conn, uuid, data["resource_provider_generation"], data["traits"]))
    body, when = _listing(found)
    body["resource_provider_generation"] = generation
    util.send(req, resp, body, last_modified=when)


def delete_provider_traits(req: falcon.Request, resp: falcon.Response,
                           uuid: str) -> None:
    util.authorize(req, RP_POLICY % "delete")
    util.db(req).run(lambda conn: trait.delete_provider_traits(conn, uuid))
    util.no_content(resp)
