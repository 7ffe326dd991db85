"""JSON Schemas for inventory bodies (identical at every microversion)."""

from __future__ import annotations

import copy
import re
from typing import Any

from berth.api.schemas import validator
from berth.api.schemas.resource_class import RC_PATTERN
from berth.domain.limits import MAX_INT

#: Largest single-precision float (MySQL stores allocation_ratio as FLOAT).
MAX_FLOAT = 3.40282e38
_RC_RE = re.compile("[A-Z0-9_]+")


def is_class_name(name: str) -> bool:
    """True when ``name`` is spelled like a resource class, all of it
    (a JSON Schema pattern's ``$`` would also accept a final newline)."""
    return _RC_RE.fullmatch(name) is not None


def _bounded_int(minimum: int) -> dict[str, Any]:
    return {"type": "integer", "maximum": MAX_INT, "minimum": minimum}


_RECORD: dict[str, Any] = {
    "type": "object",
    "properties": {
        "resource_provider_generation": {"type": "integer"},
        "total": _bounded_int(1),
        "reserved": _bounded_int(0),
        "min_unit": _bounded_int(1),
        "max_unit": _bounded_int(1),
        "step_size": _bounded_int(1),
        # Upstream sets no minimum: a ratio <= 0 fails the capacity check.
        "allocation_ratio": {"type": "number", "maximum": MAX_FLOAT},
    },
    "required": ["total", "resource_provider_generation"],
    "additionalProperties": False,
}

#: PUT /resource_providers/{uuid}/inventories/{resource_class}
PUT_ONE = copy.deepcopy(_RECORD)

#: POST /resource_providers/{uuid}/inventories
POST = copy.deepcopy(_RECORD)
POST["properties"]["resource_class"] = {"type": "string", "pattern": RC_PATTERN}
POST["required"] = ["total", "resource_class"]

_PUT_RECORD = copy.deepcopy(_RECORD)
_PUT_RECORD["required"] = ["total"]

#: PUT /resource_providers/{uuid}/inventories
PUT_ALL: dict[str, Any] = {
    "type": "object",
    "properties": {
        "resource_provider_generation": {"type": "integer"},
        "inventories": {
            "type": "object",
            "patternProperties": {RC_PATTERN: _PUT_RECORD},
            # A key outside the pattern names no class (the handler says
            # so), but its record is still checked: unchecked, an empty or
            # odd record reached the domain and failed there with a 500.
            "additionalProperties": _PUT_RECORD,
        },
    },
    "required": ["resource_provider_generation", "inventories"],
    "additionalProperties": False,
}

PUT_ONE_V = validator(PUT_ONE)
POST_V = validator(POST)
PUT_ALL_V = validator(PUT_ALL)
