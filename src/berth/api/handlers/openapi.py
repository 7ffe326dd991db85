"""``GET /openapi.json``: the OpenAPI 3.1 document (no token needed)."""

from __future__ import annotations

import falcon

from berth.api import openapi, render, util


def get_document(req: falcon.Request, resp: falcon.Response) -> None:
    """200 with the document; 406 when the client cannot take JSON."""
    util.check_accept(req)
    state = req.context.state
    # Built once per application: the routes table does not change.
    if state.openapi is None:
        state.openapi = render.dumps(openapi.document())
    resp.status = 200
    resp.content_type = render.JSON
    resp.data = state.openapi
