"""The OpenAPI 3.1 document of the whole API, which ``GET /openapi.json``
serves (``create_app`` builds it from the routes table it serves, so the
handler only hands out bytes) and ``python -m berth.cli.docgen api``
turns into ``docs/api-reference.md``.

Built from two tables: the routes (``berth.api.routes.API``: the app's
table and the routes another process serves, the watch; the where:
every path, method and the microversion a route starts at) and
``operations.OPERATIONS`` (the what: a summary, the success answers, the
request schemas and the errors; upstream's operations, then Berth's own
from ``berth_operations``, each a ``describe.Operation``). ``paths`` writes one operation from the
two, ``components`` what every operation shares. A route added to the
table without an entry in ``OPERATIONS`` fails
``tests/unit/test_openapi.py``.

Microversions: each operation carries ``x-openstack-microversion``
(``min``, ``max``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import berth
from berth.api import microversion
from berth.api.openapi_document.components import components
from berth.api.openapi_document.paths import operation


def document(routes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The OpenAPI document for ``routes`` (a routes table, as
    ``berth.api.routes.API``).

    KeyError names a route with no entry in ``OPERATIONS``.
    """
    paths: dict[str, Any] = {}
    for template, methods in routes.items():
        paths[template] = {
            method.lower(): operation(template, method, spec) for method, spec in methods.items()
        }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Berth (OpenStack Placement API)",
            "version": berth.__version__,
            "description": "The Placement HTTP API, microversions %s to %s."
            " Errors use the Placement format (see the "
            "Error schema); `code` appears from 1.23."
            % (microversion.VERSIONS[0], microversion.VERSIONS[-1]),
        },
        "security": [{"token": []}],
        "paths": paths,
        "components": components(),
    }
