"""``/resource_providers/{uuid}/usages`` and ``/usages``."""

from __future__ import annotations

from typing import Any

import falcon
from sqlalchemy.engine import Connection

from berth.api import util
from berth.api.schemas import pick
from berth.api.schemas import usage as schema
from berth.domain import errors, usage

POLICY = "placement:usages"
PROVIDER_USAGES_POLICY = "placement:resource_providers:usages"


def provider_usages(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    """200 with the provider's usage per class and its generation; 403
    unless policy allows the caller; 404 when no provider has that uuid;
    406 when the client cannot take JSON."""
    util.check_accept(req)
    util.authorize(req, PROVIDER_USAGES_POLICY)

    def work(conn: Connection) -> dict[str, Any]:
        found = usage.provider_usages(conn, uuid)
        if found is None:
            raise errors.NotFound(
                "No resource provider with uuid %s found: No resource "
                "provider with uuid %s found" % (uuid, uuid)
            )
        return {"resource_provider_generation": found[0], "usages": found[1]}

    # Usage is a "now" question: last-modified is the time of the answer.
    util.send(req, resp, util.db(req).read(work))


def total_usages(req: falcon.Request, resp: falcon.Response) -> None:
    """200 with the usage of the project (and user; by consumer type
    from 1.38); 400 for a query the schema refuses; 403 unless policy
    allows the caller (a project reader may read its own project's); 406
    when the client cannot take JSON."""
    util.check_accept(req)
    params = util.query_dict(util.query(req))
    project_id, user_id = params.get("project_id"), params.get("user_id")
    # A project reader may read its own project's usages.
    util.authorize(req, POLICY, {"project_id": project_id, "user_id": user_id})
    by_type = util.want(req, "1.38")
    util.validate_query(req, pick(schema.QUERIES, req.context.version))
    project = str(project_id)  # the schema requires it
    consumer_type = params.get("consumer_type")

    def compute(conn: Connection) -> dict[str, Any]:
        if by_type:
            return usage.usages_by_type(conn, project, user_id, consumer_type)
        return usage.project_usages(conn, project, user_id)

    # Kept until a write changes this project's usages (the memo's rule).
    key = (project, by_type, user_id, consumer_type)
    found = util.db(req).read(lambda conn: util.memo(req, "usage").kept(conn, key, compute))
    util.send(req, resp, {"usages": found})
