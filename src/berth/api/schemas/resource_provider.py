"""JSON Schemas for ``/resource_providers``, per microversion.

Upstream validates ``"format": "uuid"`` with a checker that accepts every
spelling ``uuid.UUID`` parses back to the same hex digits (dashed or not,
any case, braces, ``urn:uuid:``). jsonschema's own checker insists on
dashes, so these schemas are compiled with
:func:`berth.api.schemas.validator`, whose checker uses upstream's rule.
"""

from __future__ import annotations

import copy
from typing import Any

from berth.api import microversion
from berth.api.schemas import Versioned, validator

UUID_STRING: dict[str, Any] = {"type": "string", "format": "uuid"}

_POST: dict[str, Any] = {
    "type": "object",
    "properties": {
        # The column holds 200 characters.
        "name": {"type": "string", "maxLength": 200},
        "uuid": UUID_STRING,
    },
    "required": ["name"],
    "additionalProperties": False,
}

_POST_1_14 = copy.deepcopy(_POST)
_POST_1_14["properties"]["parent_provider_uuid"] = {"anyOf": [UUID_STRING, {"type": "null"}]}

# PUT is POST without the uuid: a provider's uuid never changes.
_PUT = copy.deepcopy(_POST)
del _PUT["properties"]["uuid"]
_PUT_1_14 = copy.deepcopy(_POST_1_14)
del _PUT_1_14["properties"]["uuid"]

#: POST /resource_providers bodies; from 1.14 with a parent.
POST_BODIES: Versioned = (("1.0", validator(_POST)), ("1.14", validator(_POST_1_14)))
#: PUT /resource_providers/{uuid} bodies; from 1.14 with a parent.
PUT_BODIES: Versioned = (("1.0", validator(_PUT)), ("1.14", validator(_PUT_1_14)))

# Query parameters of GET /resource_providers, each version adding one
# (in version order).
_QUERY_STEPS: list[tuple[str, str, dict[str, Any]]] = [
    ("1.0", "name", {"type": "string"}),
    ("1.0", "uuid", UUID_STRING),
    ("1.3", "member_of", {"type": "string"}),
    ("1.4", "resources", {"type": "string"}),
    ("1.14", "in_tree", UUID_STRING),
    ("1.18", "required", {"type": "string"}),
]


def _query_schema(version: str) -> dict[str, Any]:
    reached = microversion.parse(version)
    props = {
        name: copy.deepcopy(spec)
        for since, name, spec in _QUERY_STEPS
        if microversion.at_least(reached, since)
    }
    return {"type": "object", "properties": props, "additionalProperties": False}


#: GET /resource_providers query strings.
LIST_QUERIES: Versioned = tuple(
    (since, validator(_query_schema(since)))
    for since in dict.fromkeys(since for since, _, _ in _QUERY_STEPS)
)
