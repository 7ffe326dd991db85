"""JSON Schemas for ``PUT /resource_providers/{uuid}/aggregates``."""

from __future__ import annotations

import copy
from typing import Any

from berth.api.schemas.resource_provider import UUID_STRING
from berth.api.util import validator

_AGGREGATE_LIST: dict[str, Any] = {
    "type": "array",
    "items": UUID_STRING,
    "uniqueItems": True,
}

#: 1.1 - 1.18: the body is the bare list of aggregate uuids.
PUT_AGGREGATES_1_1 = validator(copy.deepcopy(_AGGREGATE_LIST))

#: From 1.19: the list plus the provider generation the caller saw.
PUT_AGGREGATES_1_19 = validator({
    "type": "object",
    "properties": {
        "aggregates": copy.deepcopy(_AGGREGATE_LIST),
        "resource_provider_generation": {"type": "integer"},
    },
    "required": ["aggregates", "resource_provider_generation"],
    "additionalProperties": False,
})
