"""``GET /openapi.json``: the OpenAPI 3.1 document (no token needed)."""

from __future__ import annotations

import falcon

from berth.api import render, util


def get_document(req: falcon.Request, resp: falcon.Response) -> None:
    """200 with the document (``State.openapi_json``: built by the
    application from the routes table it serves); 406 when the client
    cannot take JSON."""
    util.check_accept(req)
    resp.status = 200
    resp.content_type = render.JSON
    resp.data = req.context.state.openapi_json()
