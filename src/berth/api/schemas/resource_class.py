"""JSON Schemas for resource class bodies (from microversion 1.2)."""

from __future__ import annotations

import re
from typing import Any

from berth.api.errors import HTTPProblem
from berth.api.schemas import validator

#: Any resource class name, standard or custom (in inventories and
#: allocations).
RC_PATTERN = "^[A-Z0-9_]+$"
#: Only custom classes may be created or renamed.
CUSTOM_PATTERN = "^CUSTOM_[A-Z0-9_]+$"

#: POST /resource_classes, and PUT /resource_classes/{name} (1.2-1.6 body;
#: from 1.7 the name in the URL is checked against it).
NAME_BODY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "pattern": CUSTOM_PATTERN, "maxLength": 255},
    },
    "required": ["name"],
    "additionalProperties": False,
}

NAME_BODY_V = validator(NAME_BODY)


def check_strict(name: str) -> None:
    """400 for a name the pattern let through only because ``$`` also
    matches before a final newline."""
    if re.fullmatch("CUSTOM_[A-Z0-9_]+", name) is None:
        raise HTTPProblem(
            400, "JSON does not validate: %r does not match %r" % (name, CUSTOM_PATTERN)
        )
