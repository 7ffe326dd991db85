"""``/allocations``, ``/allocations/{consumer_uuid}`` and
``/resource_providers/{uuid}/allocations``."""

from __future__ import annotations

from typing import Any

import falcon
from sqlalchemy.engine import Connection

from berth.api import util
from berth.api.errors import HTTPProblem
from berth.api.schemas import allocation as schema
from berth.api.schemas import pick
from berth.domain import allocation, allocation_read, common, errors
from berth.domain.allocation import ConsumerAllocations

POLICY = "placement:allocations:%s"
PROVIDER_ALLOCATIONS_POLICY = "placement:resource_providers:allocations:list"


def _consumer_body(req: falcon.Request, view: allocation_read.ConsumerView) -> dict[str, Any]:
    body: dict[str, Any] = {"allocations": view.allocations}
    if not view.allocations or not util.want(req, "1.12"):
        return body
    placement = util.conf(req).placement
    body["project_id"] = view.project_id or placement.incomplete_consumer_project_id
    body["user_id"] = view.user_id or placement.incomplete_consumer_user_id
    if util.want(req, "1.28"):
        body["consumer_generation"] = view.generation
    if util.want(req, "1.38"):
        body["consumer_type"] = view.consumer_type
    return body


def get_allocations(req: falcon.Request, resp: falcon.Response, consumer_uuid: str) -> None:
    """200 with the consumer's allocations (an empty object when it
    has none: never a 404); 403 unless policy allows the caller; 406
    when the client cannot take JSON."""
    util.check_accept(req)
    util.authorize(req, POLICY % "list")
    view = util.db(req).read(lambda conn: allocation_read.for_consumer(conn, consumer_uuid))
    util.send(req, resp, _consumer_body(req, view), last_modified=view.last_modified)


def list_for_provider(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    """200 with the allocations against the provider, by consumer,
    and its generation; 403 unless policy allows the caller; 404 when no
    provider has that uuid; 406 when the client cannot take JSON."""
    util.check_accept(req)
    util.authorize(req, PROVIDER_ALLOCATIONS_POLICY)

    def work(conn: Connection) -> tuple[Any, ...]:
        row = common.require_provider(
            conn,
            uuid,
            "Resource provider '%s' not found: No resource "
            "provider with uuid %s found" % (uuid, uuid),
        )
        found, newest = allocation_read.for_provider(conn, row.id)
        return row.generation, found, newest

    generation, found, newest = util.db(req).read(work)
    if not util.want(req, "1.28"):
        for entry in found.values():
            del entry["consumer_generation"]
    util.send(
        req,
        resp,
        {"allocations": found, "resource_provider_generation": generation},
        last_modified=newest,
    )


def _owner(req: falcon.Request, data: dict[str, Any]) -> tuple[str, str]:
    """Project and user of a write; the incomplete-consumer ids before
    1.8, when the body cannot carry them."""
    if data.get("project_id") is None:
        placement = util.conf(req).placement
        return (placement.incomplete_consumer_project_id, placement.incomplete_consumer_user_id)
    return data["project_id"], data["user_id"]


def _request(req: falcon.Request, consumer_uuid: str, data: dict[str, Any]) -> ConsumerAllocations:
    """One consumer's part of a PUT or POST body, as the domain takes it."""
    raw = data["allocations"]
    if isinstance(raw, list):  # the list form, before 1.12
        wanted = {item["resource_provider"]["uuid"]: dict(item["resources"]) for item in raw}
    else:
        wanted = {rp: dict(item["resources"]) for rp, item in raw.items()}
    project, user = _owner(req, data)
    return ConsumerAllocations(
        consumer_uuid=consumer_uuid,
        allocations=wanted,
        project_id=project,
        user_id=user,
        generation=data.get("consumer_generation"),
        check_generation=util.want(req, "1.28"),
        consumer_type=data.get("consumer_type"),
    )


def _claim(
    req: falcon.Request, requests: list[ConsumerAllocations], unknown_class_prefix: str
) -> None:
    """Write ``requests`` in one transaction (run again when a claimed
    provider is deleted under it: ``allocation.run_claim``),
    wording failures as upstream words them for this endpoint."""

    def work(conn: Connection) -> None:
        allocation.replace_allocations(conn, requests)

    retries = util.conf(req).placement.allocation_conflict_retry_count
    try:
        allocation.run_claim(util.db(req), work, retries)
    except errors.UnknownResourceClass as exc:
        raise errors.UnknownResourceClass(unknown_class_prefix + exc.message) from None
    except errors.CapacityExceeded as exc:
        raise errors.CapacityExceeded("Unable to allocate inventory: " + exc.message) from None


def put_allocations(req: falcon.Request, resp: falcon.Response, consumer_uuid: str) -> None:
    """204; 400 for a malformed consumer uuid, a body the schema
    refuses, or an unknown class or provider; 403 unless policy allows
    the caller; 409 when an allocation does not fit or a consumer or
    provider generation is stale; 415 unless the body is JSON."""
    util.authorize(req, POLICY % "update")
    normal = common.normalize_uuid(consumer_uuid)
    if normal is None:
        raise HTTPProblem(400, "Malformed consumer_uuid: %s" % consumer_uuid)
    data = util.json_body(req, pick(schema.PUT_SCHEMAS, req.context.version))
    _claim(
        req,
        [_request(req, normal, data)],
        "Unable to allocate inventory for consumer %s: " % normal,
    )
    util.no_content(resp)


def post_allocations(req: falcon.Request, resp: falcon.Response) -> None:
    """204 (every consumer's allocations written, or none); 400 for
    a body the schema refuses, or an unknown class or provider; 403
    unless policy allows the caller; 409 when an allocation does not fit
    or a consumer or provider generation is stale; 415 unless the body
    is JSON."""
    util.authorize(req, POLICY % "manage")
    data = util.json_body(req, pick(schema.POST_SCHEMAS, req.context.version))
    # "mappings" (1.34) are validated by the schema and not stored.
    _claim(
        req,
        [_request(req, uuid, body) for uuid, body in data.items()],
        "Unable to allocate inventory ",
    )
    util.no_content(resp)


def delete_allocations(req: falcon.Request, resp: falcon.Response, consumer_uuid: str) -> None:
    """204; 403 unless policy allows the caller; 404 when the
    consumer holds no allocations; 409 when concurrent writes to the same
    rows keep the database refusing the transaction (as for any write)."""
    util.authorize(req, POLICY % "delete")

    def run(conn: Connection) -> None:
        allocation.delete_for_consumer(conn, consumer_uuid)

    util.db(req).run(run)
    util.no_content(resp)
