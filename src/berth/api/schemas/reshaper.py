"""JSON Schemas for ``POST /reshaper``, per microversion.

Built from the bodies it combines: each provider's entry is exactly a
``PUT /resource_providers/{uuid}/inventories`` body, and ``allocations``
is exactly a ``POST /allocations`` body of the same microversion (so
``mappings`` from 1.34, ``consumer_type`` from 1.38) except that it may be
empty: a reshape may move inventory nobody has allocated.
"""

from __future__ import annotations

import copy
from typing import Any, cast

from berth.api import microversion
from berth.api.schemas import Versioned, allocation, inventory, pick, validator

UUID_PATTERN = allocation.UUID_PATTERN


def _schema(since: str) -> dict[str, Any]:
    allocs = cast(
        dict[str, Any],
        copy.deepcopy(pick(allocation.POST_SCHEMAS, microversion.parse(since)).schema),
    )
    allocs["minProperties"] = 0
    return {
        "type": "object",
        "properties": {
            "inventories": {
                "type": "object",
                "patternProperties": {UUID_PATTERN: inventory.PUT_ALL},
                # Without a provider there is nothing to reshape.
                "minProperties": 1,
                "additionalProperties": False,
            },
            "allocations": allocs,
        },
        "required": ["inventories", "allocations"],
        "additionalProperties": False,
    }


#: POST /reshaper bodies.
SCHEMAS: Versioned = tuple((since, validator(_schema(since))) for since in ("1.30", "1.34", "1.38"))
