"""JSON Schemas for ``/allocations``, per microversion.

The shapes follow upstream's: a list of ``{resource_provider, resources}``
before 1.12, a dict keyed by provider uuid from 1.12, ``project_id`` and
``user_id`` required from 1.8, ``consumer_generation`` required from 1.28
(which also allows an empty dict, meaning "remove"), ``mappings`` from
1.34 and ``consumer_type`` from 1.38. One deliberate addition: amounts
stop at the largest 32-bit integer, the size of the ``used`` column, so a
huge number is a 400 rather than a database error.
"""

from __future__ import annotations

import copy
from typing import Any

from berth.api.schemas import Versioned, validator
from berth.api.schemas.resource_class import RC_PATTERN
from berth.domain.limits import MAX_INT

UUID_PATTERN = "^[0-9a-fA-F-]{36}$"
CONSUMER_TYPE_PATTERN = RC_PATTERN
# Request group suffixes as 1.33 allows them (unanchored, as upstream).
GROUP_PATTERN = "[a-zA-Z0-9_-]{1,64}"

_EXTERNAL_ID: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 255}
_RESOURCES: dict[str, Any] = {
    "type": "object",
    "minProperties": 1,
    "patternProperties": {
        RC_PATTERN: {"type": "integer", "minimum": 1, "maximum": MAX_INT},
    },
    "additionalProperties": False,
}

_PUT_1_0: dict[str, Any] = {
    "type": "object",
    "properties": {
        "allocations": {
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "properties": {
                    "resource_provider": {
                        "type": "object",
                        "properties": {
                            "uuid": {"type": "string", "format": "uuid"},
                        },
                        "additionalProperties": False,
                        "required": ["uuid"],
                    },
                    "resources": _RESOURCES,
                },
                "required": ["resource_provider", "resources"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["allocations"],
    "additionalProperties": False,
}

_PUT_1_8 = copy.deepcopy(_PUT_1_0)
_PUT_1_8["properties"]["project_id"] = _EXTERNAL_ID
_PUT_1_8["properties"]["user_id"] = _EXTERNAL_ID
_PUT_1_8["required"].extend(["project_id", "user_id"])

_PUT_1_12: dict[str, Any] = {
    "type": "object",
    "properties": {
        "allocations": {
            "type": "object",
            "minProperties": 1,
            "patternProperties": {
                UUID_PATTERN: {
                    "type": "object",
                    "properties": {
                        # Accepted (GET output can be sent back) but unused.
                        "generation": {"type": "integer"},
                        "resources": _RESOURCES,
                    },
                    "required": ["resources"],
                    "additionalProperties": False,
                },
            },
            "additionalProperties": False,
        },
        "project_id": _EXTERNAL_ID,
        "user_id": _EXTERNAL_ID,
    },
    "additionalProperties": False,
    "required": ["allocations", "project_id", "user_id"],
}

# POST (1.13) takes several consumers, each may have empty allocations.
_DELETABLE = copy.deepcopy(_PUT_1_12)
_DELETABLE["properties"]["allocations"]["minProperties"] = 0

_GENERATION: dict[str, Any] = {"type": ["integer", "null"]}

_PUT_1_28 = copy.deepcopy(_DELETABLE)
_PUT_1_28["properties"]["consumer_generation"] = _GENERATION
_PUT_1_28["required"].append("consumer_generation")

_MAPPINGS: dict[str, Any] = {
    "type": "object",
    "minProperties": 1,
    "patternProperties": {
        GROUP_PATTERN: {
            "type": "array",
            "minItems": 1,
            "items": {"type": "string", "format": "uuid"},
        },
    },
}
_PUT_1_34 = copy.deepcopy(_PUT_1_28)
_PUT_1_34["properties"]["mappings"] = _MAPPINGS

_PUT_1_38 = copy.deepcopy(_PUT_1_34)
_PUT_1_38["properties"]["consumer_type"] = {
    "type": "string",
    "pattern": CONSUMER_TYPE_PATTERN,
    "minLength": 1,
    "maxLength": 255,
}
_PUT_1_38["required"].append("consumer_type")


def _post(per_consumer: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "minProperties": 1,
        "additionalProperties": False,
        "patternProperties": {UUID_PATTERN: per_consumer},
    }


_POST_1_28_CONSUMER = copy.deepcopy(_DELETABLE)
_POST_1_28_CONSUMER["properties"]["consumer_generation"] = _GENERATION
_POST_1_28_CONSUMER["required"].append("consumer_generation")

#: PUT /allocations/{consumer_uuid} bodies.
PUT_SCHEMAS: Versioned = (
    ("1.0", validator(_PUT_1_0)),
    ("1.8", validator(_PUT_1_8)),
    ("1.12", validator(_PUT_1_12)),
    ("1.28", validator(_PUT_1_28)),
    ("1.34", validator(_PUT_1_34)),
    ("1.38", validator(_PUT_1_38)),
)

#: POST /allocations bodies.
POST_SCHEMAS: Versioned = (
    ("1.13", validator(_post(_DELETABLE))),
    ("1.28", validator(_post(_POST_1_28_CONSUMER))),
    ("1.34", validator(_post(_PUT_1_34))),
    ("1.38", validator(_post(_PUT_1_38))),
)
