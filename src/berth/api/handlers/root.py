"""``GET /``: version discovery."""

from __future__ import annotations

import falcon

from berth.api import microversion, util


def home(req: falcon.Request, resp: falcon.Response) -> None:
    """200 with the version document (the microversions this server
    speaks); 406 when the client cannot take JSON."""
    util.check_accept(req)
    version = {
        "id": "v%s" % microversion.VERSIONS[0],
        "max_version": microversion.VERSIONS[-1],
        "min_version": microversion.VERSIONS[0],
        "status": "CURRENT",
        "links": [{"rel": "self", "href": ""}],
    }
    util.send(req, resp, {"versions": [version]})
