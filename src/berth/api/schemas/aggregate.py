"""JSON Schemas for ``PUT /resource_providers/{uuid}/aggregates``."""

from __future__ import annotations

import copy
from typing import Any

from berth.api.schemas import Versioned, validator
from berth.api.schemas.resource_provider import UUID_STRING

_AGGREGATE_LIST: dict[str, Any] = {
    "type": "array",
    "items": UUID_STRING,
    "uniqueItems": True,
}

#: PUT bodies: from 1.1 the bare list of aggregate uuids; from 1.19 the
#: list plus the provider generation the caller saw.
PUT_BODIES: Versioned = (
    ("1.1", validator(copy.deepcopy(_AGGREGATE_LIST))),
    (
        "1.19",
        validator(
            {
                "type": "object",
                "properties": {
                    "aggregates": copy.deepcopy(_AGGREGATE_LIST),
                    "resource_provider_generation": {"type": "integer"},
                },
                "required": ["aggregates", "resource_provider_generation"],
                "additionalProperties": False,
            }
        ),
    ),
)
