"""``GET|HEAD /healthcheck`` with a token: the detailed answer for those
policy allows (see ``berth.api.healthcheck_middleware``; callers without a token are
answered before authentication)."""

from __future__ import annotations

import falcon

from berth.api import util
from berth.api.errors import HTTPProblem
from berth.domain.errors import Forbidden

DETAILS_POLICY = "berth:healthcheck:details"


def check(req: falcon.Request, resp: falcon.Response) -> None:
    """200 healthy or 503 not (HEAD: 204 or 503), with oslo.middleware's
    body; detailed when policy ``berth:healthcheck:details`` allows the
    caller, plain otherwise. 404 when ``[healthcheck]
    allowed_source_ranges`` or ``ignore_proxied_requests`` turn the
    caller away."""
    health = req.context.state.health
    try:
        util.authorize(req, DETAILS_POLICY)
        checker = health.detailed
    except Forbidden:
        checker = health.plain
    answer = checker.answer(req.env)
    if answer is None:
        raise HTTPProblem(404)
    resp.status = answer.status_int
    if answer.headers.get("Content-Type"):  # none on a 204
        resp.content_type = answer.headers["Content-Type"]
    resp.data = answer.body
