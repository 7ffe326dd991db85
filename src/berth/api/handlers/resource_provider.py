"""``/resource_providers`` and ``/resource_providers/{uuid}``."""

from __future__ import annotations

import uuid as uuidlib
from collections.abc import Callable
from typing import Any

import falcon
import orjson

from berth.api import microversion, util
from berth.api.schemas import pick
from berth.api.schemas import resource_provider as schema
from berth.db import AnyRow
from berth.domain import resource_provider
from berth.domain.allocation_candidate.provider_filter import filter_provider_ids

POLICY = "placement:resource_providers:%s"
#: Query parameters matched by the allocation-candidate engine.
ENGINE_FILTERS = frozenset({"resources", "required", "member_of"})
#: Query parameters matched in SQL; without them, an engine-filtered
#: listing reads kept provider rows (``State.provider_memo``).
SQL_FILTERS = frozenset({"name", "uuid", "in_tree"})


def _link_rels(req: falcon.Request) -> list[str]:
    """Sub-resource links at this microversion (computed once a request)."""
    rels: list[str] | None = req.context.get("provider_link_rels")
    if rels is None:
        rels = ["inventories", "usages"]
        for since, rel in (("1.1", "aggregates"), ("1.6", "traits"), ("1.11", "allocations")):
            if util.want(req, since):
                rels.append(rel)
        req.context.provider_link_rels = rels
    return rels


def _provider_body(req: falcon.Request, row: AnyRow) -> dict[str, Any]:
    """One provider as GET, POST (1.20+) and PUT show it; ``row`` is a
    :func:`berth.domain.resource_provider.get_provider` row."""
    return _body_maker(req)(row)


def _body_maker(req: falcon.Request) -> Callable[[AnyRow], dict[str, Any]]:
    """A function making provider bodies at this request's microversion
    (what does not change from provider to provider worked out once: a
    listing makes thousands)."""
    # The links are the same JSON but for the uuid (which needs no
    # escaping): rendered once as a template, not as five dicts each.
    base = orjson.dumps("%s/resource_providers/" % req.root_path)[1:-1]
    parts = [b'[{"rel":"self","href":"%s%%s"}' % base] + [
        b'{"rel":"%s","href":"%s%%s/%s"}' % (rel.encode(), base, rel.encode())
        for rel in _link_rels(req)
    ]
    template = b",".join(parts) + b"]"
    count = len(parts)
    nested = util.want(req, "1.14")

    def make(row: AnyRow) -> dict[str, Any]:
        uuid = row.uuid.encode()
        body: dict[str, Any] = {
            "uuid": row.uuid,
            "name": row.name,
            "generation": row.generation,
            "links": orjson.Fragment(template % ((uuid,) * count)),
        }
        if nested:
            body["parent_provider_uuid"] = row.parent_provider_uuid
            body["root_provider_uuid"] = row.root_provider_uuid
        return body

    return make


def _modified(row: AnyRow) -> Any:
    return row.updated_at or row.created_at


def list_providers(req: falcon.Request, resp: falcon.Response) -> None:
    """200 with the providers the query matches; 400 for a query the
    schema refuses or one naming an unknown class or trait; 403 unless
    policy allows the caller; 406 when the client cannot take JSON."""
    util.check_accept(req)
    util.authorize(req, POLICY % "list")
    version = req.context.version
    pairs = util.validate_query(req, pick(schema.LIST_QUERIES, version))
    params = util.query_dict(pairs)

    def engine_ids(conn: Any) -> set[int] | None:
        if not ENGINE_FILTERS.intersection(params):
            return None
        # The allocation-candidate engine owns these parameters: one
        # parser and one matcher for both endpoints.
        return filter_provider_ids(
            conn, util.candidate_cache(req), pairs, microversion.wants(version)
        )

    if ENGINE_FILTERS.intersection(params) and not SQL_FILTERS.intersection(params):
        kept = util.db(req).read(
            lambda conn: resource_provider.kept_providers(
                conn, util.memo(req, "provider"), engine_ids(conn) or ()
            )
        )
        _send_kept(req, resp, kept)
        return
    rows = util.db(req).read(
        lambda conn: resource_provider.list_providers(
            conn,
            name=params.get("name"),
            uuid=params.get("uuid"),
            in_tree=params.get("in_tree"),
            ids=engine_ids(conn),
        )
    )
    make = _body_maker(req)
    util.send(
        req,
        resp,
        {"resource_providers": [make(r) for r in rows]},
        last_modified=util.newest(_modified(r) for r in rows),
    )


def _send_kept(
    req: falcon.Request, resp: falcon.Response, kept: list[resource_provider.Kept]
) -> None:
    """A listing of kept providers, each body encoded once per shape (the
    same bytes as encoding it within the listing)."""
    shape = (req.root_path, util.want(req, "1.14"), *_link_rels(req))
    make: Callable[[AnyRow], dict[str, Any]] | None = None
    bodies = []
    for k in kept:
        body = k.renderings.get(shape)
        if body is None:
            make = make or _body_maker(req)
            # A copy: orjson's own bytes keep a 4 KB buffer each.
            body = k.renderings[shape] = orjson.Fragment(
                bytes(memoryview(orjson.dumps(make(k.row))))
            )
        bodies.append(body)
    util.send(
        req,
        resp,
        {"resource_providers": bodies},
        last_modified=util.newest(_modified(k.row) for k in kept),
    )


def get_provider(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    """200 with the provider; 403 unless policy allows the caller; 404
    when no provider has that uuid; 406 when the client cannot take
    JSON."""
    util.check_accept(req)
    util.authorize(req, POLICY % "show")
    row = util.db(req).read(lambda conn: resource_provider.load_provider(conn, uuid))
    util.send(req, resp, _provider_body(req, row), last_modified=_modified(row))


def create_provider(req: falcon.Request, resp: falcon.Response) -> None:
    """200 with the provider from 1.20, 201 without a body before
    (both with its location); 400 for a body the schema refuses or a
    parent that does not exist; 403 unless policy allows the caller;
    409 when the name or uuid is taken; 415 unless the body is JSON."""
    util.authorize(req, POLICY % "create")
    data = util.json_body(req, pick(schema.POST_BODIES, req.context.version))
    # Stored dashed and lower-case whatever spelling the client used.
    uuid = str(uuidlib.UUID(data["uuid"])) if data.get("uuid") else str(uuidlib.uuid4())
    row = util.db(req).run(
        lambda conn: resource_provider.create_provider(
            conn, data["name"], uuid, data.get("parent_provider_uuid")
        )
    )
    # Absolute, as upstream (webob) sends it; req.prefix has the mount.
    resp.set_header("location", "%s/resource_providers/%s" % (req.prefix, uuid))
    if util.want(req, "1.20"):
        util.send(req, resp, _provider_body(req, row), last_modified=_modified(row))
    else:
        resp.status = 201
        resp.data = b""
        resp.content_type = None  # type: ignore[assignment]


def update_provider(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    """200 with the provider; 400 for a body the schema refuses or a
    move the tree rules refuse (a missing parent, a loop, re-parenting
    before 1.37); 403 unless policy allows the caller; 404 when no
    provider has that uuid; 409 when the name is taken; 415 unless the
    body is JSON."""
    # Upstream's order: media type (415), policy (403), provider (404),
    # then the body (400).
    util.require_json(req)
    util.authorize(req, POLICY % "update")
    data = util.parse_or_not_found(
        req,
        lambda: util.json_body(req, pick(schema.PUT_BODIES, req.context.version)),
        lambda conn: resource_provider.load_provider(conn, uuid),
    )
    parent = data.get("parent_provider_uuid", resource_provider.KEEP)
    row = util.db(req).run(
        lambda conn: resource_provider.update_provider(
            conn, uuid, data["name"], parent, allow_reparenting=util.want(req, "1.37")
        )
    )
    util.send(req, resp, _provider_body(req, row), last_modified=_modified(row))


def delete_provider(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    """204; 403 unless policy allows the caller; 404 when no provider
    has that uuid; 409 when it has children or allocations."""
    util.authorize(req, POLICY % "delete")
    util.db(req).run(lambda conn: resource_provider.delete_provider(conn, uuid))
    util.no_content(resp)
