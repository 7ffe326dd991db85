"""``GET /metrics``: the Prometheus metrics (``berth.metrics``)."""

from __future__ import annotations

import falcon
import prometheus_client

from berth.api import util

POLICY = "berth:metrics:show"


def show(req: falcon.Request, resp: falcon.Response) -> None:
    """200 with every metric in the Prometheus text format; 403 unless
    policy ``berth:metrics:show`` (admin) allows the caller."""
    util.authorize(req, POLICY)
    resp.status = 200
    resp.content_type = prometheus_client.CONTENT_TYPE_LATEST
    resp.data = req.context.state.metrics.exposition()
