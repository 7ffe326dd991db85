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

import jsonschema

from berth.api import util
from berth.api.schemas import allocation, inventory

UUID_PATTERN = allocation.UUID_PATTERN


def _schema(since: tuple[int, int]) -> dict[str, Any]:
    allocs = cast(dict[str, Any], copy.deepcopy(allocation.pick(
        allocation.POST_SCHEMAS, since).schema))
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


#: (first microversion, body schema), newest last.
SCHEMAS: list[tuple[tuple[int, int], jsonschema.protocols.Validator]] = [
    ((1, 30), util.validator(_schema((1, 30)))),
    ((1, 34), util.validator(_schema((1, 34)))),
    ((1, 38), util.validator(_schema((1, 38)))),
]


def pick(version: tuple[int, int]) -> jsonschema.protocols.Validator:
    """The schema for a request at ``version``."""
    return allocation.pick(SCHEMAS, version)
