"""JSON Schemas of response bodies, for the OpenAPI document
(``berth.api.openapi_document``) and the tests that check real answers against it.

They describe every microversion at once: a field that appears only from
some microversion is listed but not required. Extra fields are allowed so
a later microversion can add one without breaking a generated client.
"""

from __future__ import annotations

from typing import Any

_STR: dict[str, Any] = {"type": "string"}
_INT: dict[str, Any] = {"type": "integer"}
_UUID: dict[str, Any] = {"type": "string", "format": "uuid"}
_UUID_OR_NULL: dict[str, Any] = {"type": ["string", "null"]}


def _obj(required: dict[str, Any], optional: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {**required, **(optional or {})},
        "required": sorted(required),
    }


def _map(values: dict[str, Any]) -> dict[str, Any]:
    return {"type": "object", "additionalProperties": values}


#: ``GET /berth/changes`` (docs/change-feed.md).
CHANGES: dict[str, Any] = _obj(
    {
        "position": _STR,
        "more": {"type": "boolean"},
        "events": {
            "type": "array",
            "items": _obj(
                {
                    "position": _STR,
                    "index": _INT,
                    "kind": _STR,
                    "subject": _UUID_OR_NULL,
                    "time": {"type": "number"},
                    "new": {},
                    "old": {},
                }
            ),
        },
    }
)

LINKS: dict[str, Any] = {"type": "array", "items": _obj({"rel": _STR, "href": _STR})}

#: The Placement error format; ``code`` from 1.23.
ERROR: dict[str, Any] = _obj(
    {
        "errors": {
            "type": "array",
            "minItems": 1,
            "items": _obj(
                {"status": _INT, "title": _STR, "detail": _STR}, {"code": _STR, "request_id": _STR}
            ),
        }
    }
)

VERSIONS: dict[str, Any] = _obj(
    {
        "versions": {
            "type": "array",
            "items": _obj(
                {
                    "id": _STR,
                    "min_version": _STR,
                    "max_version": _STR,
                    "status": _STR,
                    "links": LINKS,
                }
            ),
        }
    }
)

PROVIDER: dict[str, Any] = _obj(
    {"uuid": _UUID, "name": _STR, "generation": _INT, "links": LINKS},
    {"parent_provider_uuid": _UUID_OR_NULL, "root_provider_uuid": _UUID_OR_NULL},
)
PROVIDERS: dict[str, Any] = _obj({"resource_providers": {"type": "array", "items": PROVIDER}})

_INVENTORY_FIELDS: dict[str, Any] = {
    "total": _INT,
    "reserved": _INT,
    "min_unit": _INT,
    "max_unit": _INT,
    "step_size": _INT,
    "allocation_ratio": {"type": "number"},
}
#: One inventory; the generation is left out while it is 0, as upstream.
INVENTORY: dict[str, Any] = _obj(_INVENTORY_FIELDS, {"resource_provider_generation": _INT})
INVENTORIES: dict[str, Any] = _obj(
    {"resource_provider_generation": _INT, "inventories": _map(_obj(_INVENTORY_FIELDS))}
)

_AMOUNTS: dict[str, Any] = _map(_INT)
PROVIDER_USAGES: dict[str, Any] = _obj({"resource_provider_generation": _INT, "usages": _AMOUNTS})
#: Before 1.38 class -> amount; from 1.38 consumer type -> that map, with
#: a consumer_count per type.
USAGES: dict[str, Any] = _obj({"usages": _map({"type": ["integer", "object"]})})

AGGREGATES: dict[str, Any] = _obj(
    {"aggregates": {"type": "array", "items": _UUID}}, {"resource_provider_generation": _INT}
)

TRAITS: dict[str, Any] = _obj({"traits": {"type": "array", "items": _STR}})
PROVIDER_TRAITS: dict[str, Any] = _obj(
    {"traits": {"type": "array", "items": _STR}, "resource_provider_generation": _INT}
)

RESOURCE_CLASS: dict[str, Any] = _obj({"name": _STR, "links": LINKS})
RESOURCE_CLASSES: dict[str, Any] = _obj(
    {"resource_classes": {"type": "array", "items": RESOURCE_CLASS}}
)

#: GET /allocations/{consumer_uuid}: an empty dict when it has none.
CONSUMER_ALLOCATIONS: dict[str, Any] = _obj(
    {"allocations": _map(_obj({"resources": _AMOUNTS}, {"generation": _INT}))},
    {
        "project_id": _STR,
        "user_id": _STR,
        "consumer_generation": {"type": ["integer", "null"]},
        "consumer_type": {"type": ["string", "null"]},
    },
)

PROVIDER_ALLOCATIONS: dict[str, Any] = _obj(
    {
        "resource_provider_generation": _INT,
        "allocations": _map(_obj({"resources": _AMOUNTS}, {"consumer_generation": _INT})),
    }
)

_REQUEST_1_10: dict[str, Any] = _obj(
    {
        "allocations": {
            "type": "array",
            "items": _obj({"resource_provider": _obj({"uuid": _UUID}), "resources": _AMOUNTS}),
        }
    }
)
_REQUEST_1_12: dict[str, Any] = _obj(
    {"allocations": _map(_obj({"resources": _AMOUNTS}))},
    {"mappings": _map({"type": "array", "items": _UUID})},
)
CANDIDATES: dict[str, Any] = _obj(
    {
        "allocation_requests": {
            "type": "array",
            "items": {"anyOf": [_REQUEST_1_10, _REQUEST_1_12]},
        },
        "provider_summaries": _map(
            _obj(
                {"resources": _map(_obj({"capacity": _INT, "used": _INT}))},
                {
                    "traits": {"type": "array", "items": _STR},
                    "parent_provider_uuid": _UUID_OR_NULL,
                    "root_provider_uuid": _UUID_OR_NULL,
                },
            )
        ),
    }
)
