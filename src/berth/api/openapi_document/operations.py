"""What each operation of the API does, for the OpenAPI document: the
summary, the success answers, the request schemas and the errors, per
(path, method) of the routes table. Request schemas are the very
``Versioned`` tables the handlers pick from, imported, never copied;
response schemas live in ``berth.api.schemas.responses``."""

from __future__ import annotations

from berth.api.openapi_document.berth_operations import BERTH_OPERATIONS
from berth.api.openapi_document.describe import IGNORED, Operation, link, one
from berth.api.schemas import aggregate as agg_s
from berth.api.schemas import allocation as alloc_s
from berth.api.schemas import allocation_candidate as cand_s
from berth.api.schemas import inventory as inv_s
from berth.api.schemas import reshaper as reshaper_s
from berth.api.schemas import resource_class as rc_s
from berth.api.schemas import resource_provider as rp_s
from berth.api.schemas import responses as r
from berth.api.schemas import trait as trait_s
from berth.api.schemas import usage as usage_s

_RP = "/resource_providers/{uuid}"
_NEW_PROVIDER = {"uuid": "$response.body#/uuid"}
_SAME_PROVIDER = {"uuid": "$request.path.uuid"}
_SAME_CONSUMER = {"consumer_uuid": "$request.path.consumer_uuid"}


#: (path, method) -> Operation. The lead adds an entry with each new route
#: (a Berth-only one in ``berth_operations``).
OPERATIONS: dict[tuple[str, str], Operation] = {
    ("/", "GET"): Operation(
        "Version discovery: the microversions this server speaks.", {200: r.VERSIONS}, public=True
    ),
    ("/openapi.json", "GET"): Operation(
        "This document: the whole API as OpenAPI 3.1.", {200: {"type": "object"}}, public=True
    ),
    ("/resource_providers", "GET"): Operation(
        "List resource providers, filtered by name, uuid, tree, "
        "aggregates, traits and available resources.",
        {200: r.PROVIDERS},
        cached=True,
        query=rp_s.LIST_QUERIES,
    ),
    ("/resource_providers", "POST"): Operation(
        "Create a resource provider (201 without a body before 1.20, "
        "200 with the provider from 1.20).",
        {200: r.PROVIDER, 201: None},
        errors=(409,),
        cached=True,
        body=rp_s.POST_BODIES,
        links={
            200: {
                "SetInventories": link("PUT", _RP + "/inventories", _NEW_PROVIDER),
                "AddInventory": link("POST", _RP + "/inventories", _NEW_PROVIDER),
                "SetTraits": link("PUT", _RP + "/traits", _NEW_PROVIDER),
                "SetAggregates": link("PUT", _RP + "/aggregates", _NEW_PROVIDER),
                "GetProvider": link("GET", _RP, _NEW_PROVIDER),
            }
        },
    ),
    (_RP, "GET"): Operation(
        "Show one resource provider.", {200: r.PROVIDER}, errors=(404,), cached=True
    ),
    (_RP, "PUT"): Operation(
        "Rename a provider or (from 1.14) set its parent; re-parenting from 1.37.",
        {200: r.PROVIDER},
        errors=(404, 409),
        cached=True,
        body=rp_s.PUT_BODIES,
    ),
    (_RP, "DELETE"): Operation(
        "Delete a provider that has no allocations and no children.", {204: None}, errors=(404, 409)
    ),
    (_RP + "/inventories", "GET"): Operation(
        "List the provider's inventories.", {200: r.INVENTORIES}, errors=(404,), cached=True
    ),
    (_RP + "/inventories", "POST"): Operation(
        "Add one inventory to the provider.",
        {201: r.INVENTORY},
        errors=(404, 409),
        body=one(inv_s.POST_V),
    ),
    (_RP + "/inventories", "PUT"): Operation(
        "Replace all of the provider's inventories.",
        {200: r.INVENTORIES},
        errors=(404, 409),
        body=one(inv_s.PUT_ALL_V),
        links={
            200: {
                "GetUsages": link("GET", _RP + "/usages", _SAME_PROVIDER),
                "GetInventory": link(
                    "GET",
                    _RP + "/inventories/{resource_class}",
                    {**_SAME_PROVIDER, "resource_class": "VCPU"},
                ),
                # The 1.0 body names the provider in a value, where a link can
                # put it; the consumer is new.
                "Allocate": link(
                    "PUT",
                    "/allocations/{consumer_uuid}",
                    {
                        "consumer_uuid": "7e57c0de-0000-4000-8000-000000000001",
                        "header.OpenStack-API-Version": "placement 1.0",
                    },
                    {
                        "allocations": [
                            {
                                "resource_provider": {"uuid": "$request.path.uuid"},
                                "resources": {"VCPU": 1},
                            }
                        ]
                    },
                ),
            }
        },
    ),
    (_RP + "/inventories", "DELETE"): Operation(
        "Delete all of the provider's inventories (1.5).", {204: None}, errors=(404, 409)
    ),
    (_RP + "/inventories/{resource_class}", "GET"): Operation(
        "Show one inventory.", {200: r.INVENTORY}, errors=(404,), cached=True
    ),
    (_RP + "/inventories/{resource_class}", "PUT"): Operation(
        "Update one inventory.", {200: r.INVENTORY}, errors=(404, 409), body=one(inv_s.PUT_ONE_V)
    ),
    (_RP + "/inventories/{resource_class}", "DELETE"): Operation(
        "Delete one inventory.", {204: None}, errors=(404, 409)
    ),
    (_RP + "/usages", "GET"): Operation(
        "The provider's usage per resource class.",
        {200: r.PROVIDER_USAGES},
        errors=(404,),
        cached=True,
    ),
    (_RP + "/aggregates", "GET"): Operation(
        "The provider's aggregates.", {200: r.AGGREGATES}, errors=(404,), cached=True
    ),
    (_RP + "/aggregates", "PUT"): Operation(
        "Replace the provider's aggregates (with its generation from 1.19).",
        {200: r.AGGREGATES},
        errors=(404, 409),
        cached=True,
        body=agg_s.PUT_BODIES,
    ),
    (_RP + "/allocations", "GET"): Operation(
        "The allocations against the provider, by consumer.",
        {200: r.PROVIDER_ALLOCATIONS},
        errors=(404,),
        cached=True,
    ),
    (_RP + "/traits", "GET"): Operation(
        "The provider's traits.", {200: r.PROVIDER_TRAITS}, errors=(404,), cached=True
    ),
    (_RP + "/traits", "PUT"): Operation(
        "Replace the provider's traits.",
        {200: r.PROVIDER_TRAITS},
        errors=(404, 409),
        cached=True,
        body=one(trait_s.SET_PROVIDER_TRAITS_V),
    ),
    (_RP + "/traits", "DELETE"): Operation(
        "Remove all of the provider's traits.", {204: None}, errors=(404, 409)
    ),
    ("/resource_classes", "GET"): Operation(
        "List resource classes, standard and custom.", {200: r.RESOURCE_CLASSES}, cached=True
    ),
    ("/resource_classes", "POST"): Operation(
        "Create a custom resource class.", {201: None}, errors=(409,), body=one(rc_s.NAME_BODY_V)
    ),
    ("/resource_classes/{name}", "GET"): Operation(
        "Show one resource class.", {200: r.RESOURCE_CLASS}, errors=(404,), cached=True
    ),
    ("/resource_classes/{name}", "PUT"): Operation(
        "Before 1.7, rename a custom class (body: the new name); from 1.7, "
        "create it if absent (201) or confirm it (204), without a body.",
        {200: r.RESOURCE_CLASS, 201: None, 204: None},
        errors=(404, 409),
        body=(("1.2", rc_s.NAME_BODY_V), ("1.7", IGNORED)),
    ),
    ("/resource_classes/{name}", "DELETE"): Operation(
        "Delete a custom class nobody uses.", {204: None}, errors=(404, 409)
    ),
    ("/allocations", "POST"): Operation(
        "Write the allocations of several consumers in one transaction.",
        {204: None},
        errors=(409,),
        body=alloc_s.POST_SCHEMAS,
    ),
    ("/allocations/{consumer_uuid}", "GET"): Operation(
        "A consumer's allocations (an empty object when it has none).",
        {200: r.CONSUMER_ALLOCATIONS},
        cached=True,
    ),
    ("/allocations/{consumer_uuid}", "PUT"): Operation(
        "Replace a consumer's allocations (with its generation from 1.28).",
        {204: None},
        errors=(409,),
        body=alloc_s.PUT_SCHEMAS,
        links={
            204: {
                "GetAllocations": link("GET", "/allocations/{consumer_uuid}", _SAME_CONSUMER),
                "DeleteAllocations": link("DELETE", "/allocations/{consumer_uuid}", _SAME_CONSUMER),
            }
        },
    ),
    ("/allocations/{consumer_uuid}", "DELETE"): Operation(
        "Remove all of a consumer's allocations.", {204: None}, errors=(404, 409)
    ),
    ("/allocation_candidates", "GET"): Operation(
        "Where a request fits: allocation requests and provider "
        "summaries. Request groups take a suffix from 1.25 (resources1, "
        "required1, member_of1, in_tree1; any 1-64 of [a-zA-Z0-9_-] from "
        "1.33).",
        {200: r.CANDIDATES},
        cached=True,
        query=cand_s.SCHEMAS,
    ),
    ("/traits", "GET"): Operation(
        "List traits, filtered by name (in:A,B or startswith:P) and by "
        "whether a provider has them.",
        {200: r.TRAITS},
        cached=True,
        query=one(trait_s.LIST_QUERY_V),
    ),
    ("/traits/{name}", "GET"): Operation("Whether a trait exists.", {204: None}, errors=(404,)),
    ("/traits/{name}", "PUT"): Operation(
        "Create a custom trait (201) or confirm it exists (204).", {201: None, 204: None}
    ),
    ("/traits/{name}", "DELETE"): Operation(
        "Delete a custom trait no provider has.", {204: None}, errors=(404, 409)
    ),
    ("/usages", "GET"): Operation(
        "A project's (and optionally a user's) usage; by consumer type from 1.38.",
        {200: r.USAGES},
        cached=True,
        query=usage_s.QUERIES,
    ),
    ("/reshaper", "POST"): Operation(
        "Move inventories and allocations between providers in one transaction.",
        {204: None},
        errors=(409,),
        body=reshaper_s.SCHEMAS,
    ),
    # Berth's own operations.
    **BERTH_OPERATIONS,
}
