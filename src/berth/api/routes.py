"""The one routes table: URL -> {METHOD: handler}.

A handler may be gated by microversion: ``(handler, "1.6")`` answers 404
below 1.6, and ``(handler, "1.5", 405)`` answers 405, as upstream does.

``SERVED_ELSEWHERE`` lists, beside the table, the routes of the API that
another process serves (the change feed's watch form), and ``API`` is the
whole API wherever served: what the OpenAPI document and ``docs/api.md``
describe.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import falcon

from berth.api import microversion
from berth.api.errors import HTTPProblem
from berth.api.handlers import (
    aggregate,
    allocation,
    allocation_candidate,
    change,
    dashboard,
    explain,
    fit,
    healthcheck,
    inventory,
    metrics,
    openapi,
    reshaper,
    resource_class,
    resource_provider,
    root,
    trait,
    usage,
)

Handler = Callable[..., None]
Gated = Handler | tuple[Handler, str] | tuple[Handler, str, int]

RP = "/resource_providers/{uuid}"

ROUTES: dict[str, dict[str, Gated]] = {
    "/": {"GET": root.home},
    "/openapi.json": {"GET": openapi.get_document},
    "/resource_providers": {
        "GET": resource_provider.list_providers,
        "POST": resource_provider.create_provider,
    },
    RP: {
        "GET": resource_provider.get_provider,
        "PUT": resource_provider.update_provider,
        "DELETE": resource_provider.delete_provider,
    },
    RP + "/inventories": {
        "GET": inventory.list_inventories,
        "POST": inventory.create_inventory,
        "PUT": inventory.replace_inventories,
        "DELETE": (inventory.delete_inventories, "1.5", 405),
    },
    RP + "/inventories/{resource_class}": {
        "GET": inventory.get_inventory,
        "PUT": inventory.update_inventory,
        "DELETE": inventory.delete_inventory,
    },
    RP + "/usages": {"GET": usage.provider_usages},
    RP + "/aggregates": {
        "GET": (aggregate.get_aggregates, "1.1"),
        "PUT": (aggregate.set_aggregates, "1.1"),
    },
    RP + "/allocations": {"GET": allocation.list_for_provider},
    RP + "/traits": {
        "GET": (trait.list_provider_traits, "1.6"),
        "PUT": (trait.set_provider_traits, "1.6"),
        "DELETE": (trait.delete_provider_traits, "1.6"),
    },
    "/resource_classes": {
        "GET": (resource_class.list_classes, "1.2"),
        "POST": (resource_class.create_class, "1.2"),
    },
    "/resource_classes/{name}": {
        "GET": (resource_class.get_class, "1.2"),
        "PUT": (resource_class.update_class, "1.2"),
        "DELETE": (resource_class.delete_class, "1.2"),
    },
    "/allocations": {"POST": (allocation.post_allocations, "1.13")},
    "/allocations/{consumer_uuid}": {
        "GET": allocation.get_allocations,
        "PUT": allocation.put_allocations,
        "DELETE": allocation.delete_allocations,
    },
    "/allocation_candidates": {
        "GET": (allocation_candidate.list_candidates, "1.10"),
    },
    "/traits": {"GET": (trait.list_traits, "1.6")},
    "/traits/{name}": {
        "GET": (trait.get_trait, "1.6"),
        "PUT": (trait.put_trait, "1.6"),
        "DELETE": (trait.delete_trait, "1.6"),
    },
    "/usages": {"GET": (usage.total_usages, "1.9")},
    "/reshaper": {"POST": (reshaper.reshape, "1.30")},
    # Berth's own (oslo.middleware's URL; see api/healthcheck_middleware.py).
    "/healthcheck": {"GET": healthcheck.check, "HEAD": healthcheck.check},
    "/metrics": {"GET": metrics.show},
    # Berth's own (docs/explain-and-fit.md): the allocation-candidates
    # query language, so from the same microversion.
    "/berth/explain/allocation_candidates": {
        "GET": (explain.explain_candidates, "1.10"),
    },
    "/berth/fit": {"GET": (fit.fit_request, "1.10")},
    # Berth's own: GET /allocation_candidates with the order chosen per
    # request (docs/allocation-candidates.md, "Order").
    "/berth/allocation_candidates": {
        "GET": (allocation_candidate.list_ordered_candidates, "1.10"),
    },
    # The change feed (docs/change-feed.md): any microversion.
    "/berth/changes": {"GET": change.list_changes},
    # The read-only web view (docs/dashboard.md): HTML, any microversion.
    "/dashboard": {"GET": dashboard.overview},
    "/dashboard/providers": {"GET": dashboard.providers},
    "/dashboard/consumers": {"GET": dashboard.consumers},
    "/dashboard/explain": {"GET": dashboard.explain_page},
    "/dashboard/fit": {"GET": dashboard.fit_page},
    "/dashboard/first": {"GET": dashboard.first_page},
    # The change feed's own handler, where the dashboard's pages reach it
    # (a browser's token-less request, a proxy open to /dashboard only).
    "/dashboard/changes": {"GET": change.list_changes},
    "/dashboard/seq": {"GET": dashboard.sequence},
    "/dashboard/static/{name}": {"GET": dashboard.static},
}

#: The change feed's watch form (docs/change-feed.md): a stream no server
#: worker should hold, so not served by this app but by ``berth serve``'s
#: watch server (``berth.serve.watch``, a process of its own listening on
#: ``[berth] watch_listen``), with this app's authentication, policy,
#: query and error mapping.
WATCH = "/berth/changes/watch"

#: Routes of the API another process serves: URL -> {METHOD: who serves
#: it}.
SERVED_ELSEWHERE: dict[str, dict[str, str]] = {
    WATCH: {"GET": "berth.serve.watch"},
}

#: Every route of the API, wherever it is served.
API: dict[str, Mapping[str, Gated | str]] = {**ROUTES, **SERVED_ELSEWHERE}


def _gate(spec: Gated) -> Handler:
    if not isinstance(spec, tuple):
        return spec
    handler, minimum = spec[0], spec[1]
    status = spec[2] if len(spec) > 2 else 404  # type: ignore[misc]
    microversion.parse(minimum)  # a typo fails here, not at a request

    def gated(req: falcon.Request, resp: falcon.Response, **kw: Any) -> None:
        if not microversion.at_least(req.context.version, minimum):
            headers = {}
            if status == 405:
                headers["Allow"] = req.context.allow
            raise HTTPProblem(status, headers=headers)
        handler(req, resp, **kw)

    return gated


class _Route:
    """A Falcon resource made from one row of the table."""

    def __init__(self, methods: dict[str, Gated]) -> None:
        self.allow = ", ".join(methods)
        for method, spec in methods.items():
            setattr(self, "on_" + method.lower(), self._bind(_gate(spec)))
        # Every other method (OPTIONS included: upstream has no OPTIONS
        # responder) answers 405 listing only the real methods.
        for method in falcon.constants.COMBINED_METHODS:
            if method not in methods:
                setattr(self, "on_" + method.lower(), self._not_allowed)

    def _bind(self, handler: Handler) -> Handler:
        allow = self.allow

        def responder(req: falcon.Request, resp: falcon.Response, **kw: Any) -> None:
            req.context.allow = allow
            handler(req, resp, **kw)

        return responder

    def _not_allowed(self, req: falcon.Request, resp: falcon.Response, **kw: Any) -> None:
        raise falcon.HTTPMethodNotAllowed(self.allow.split(", "))


def _elsewhere(template: str) -> Handler:
    """The answer on this app's address for a route another process
    serves: a 404 saying where it is served."""

    def responder(req: falcon.Request, resp: falcon.Response, **kw: Any) -> None:
        raise HTTPProblem(
            404,
            "%s is served on the change feed's own listener ([berth] "
            "watch_listen), not on this address." % template,
        )

    return responder


def install_routes(app: falcon.App[Any, Any]) -> None:
    for template, methods in ROUTES.items():
        app.add_route(template, _Route(methods))
    # Routes another process serves: on this address a GET says where,
    # and any other method is refused as on every route (405).
    for template, elsewhere in SERVED_ELSEWHERE.items():
        app.add_route(template, _Route({m: _elsewhere(template) for m in elsewhere}))
