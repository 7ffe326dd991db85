"""JSON Schemas for the query string of ``GET /usages``."""

from __future__ import annotations

import copy
from typing import Any

from berth.api.schemas import Versioned, validator

_ID: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 255}

_USAGES_1_9: dict[str, Any] = {
    "type": "object",
    "properties": {"project_id": _ID, "user_id": _ID},
    "required": ["project_id"],
    "additionalProperties": False,
}

# 1.38 adds an optional consumer_type filter; "all" and "unknown" are the
# two lower-case names it accepts besides real types.
_USAGES_1_38 = copy.deepcopy(_USAGES_1_9)
_USAGES_1_38["properties"]["consumer_type"] = {
    "type": "string",
    "pattern": "^[A-Z0-9_]+$|^all|^unknown$",
    "minLength": 1,
    "maxLength": 255,
}

#: GET /usages query strings.
QUERIES: Versioned = (
    ("1.9", validator(_USAGES_1_9)),
    ("1.38", validator(_USAGES_1_38)),
)
