"""JSON Schemas for the query string of ``GET /allocation_candidates``,
one per microversion where the accepted parameters change."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema

from berth.api.util import validator

_STRING: dict[str, Any] = {"type": "string"}

_1_10: dict[str, Any] = {
    "type": "object",
    "properties": {"resources": _STRING},
    "required": ["resources"],
    "additionalProperties": False,
}

_1_16 = copy.deepcopy(_1_10)
_1_16["properties"]["limit"] = {
    "type": ["integer", "string"], "pattern": "^[1-9][0-9]*$",
    "minimum": 1, "minLength": 1}

_1_17 = copy.deepcopy(_1_16)
_1_17["properties"]["required"] = {"type": ["string"]}

_1_21 = copy.deepcopy(_1_17)
_1_21["properties"]["member_of"] = {"type": ["string"]}


def _grouped(suffix: str, prefixes: tuple[str, ...]) -> dict[str, Any]:
    return {"^%s(%s)?$" % (p, suffix): _STRING for p in prefixes}


# 1.25: numbered groups replace the plain keys, and group_policy arrives.
_1_25 = copy.deepcopy(_1_21)
for _key in ("resources", "required", "member_of"):
    del _1_25["properties"][_key]
del _1_25["required"]
_1_25["patternProperties"] = _grouped(
    "[1-9][0-9]*", ("resources", "required", "member_of"))
_1_25["properties"]["group_policy"] = {"type": "string",
                                       "enum": ["none", "isolate"]}

_1_31 = copy.deepcopy(_1_25)
_1_31["patternProperties"].update(_grouped("[1-9][0-9]*", ("in_tree",)))

# 1.33: suffixes may be any 1-64 characters of [a-zA-Z0-9_-].
_1_33 = copy.deepcopy(_1_31)
_1_33["patternProperties"] = _grouped(
    "[a-zA-Z0-9_-]{1,64}", ("resources", "required", "member_of", "in_tree"))

_1_35 = copy.deepcopy(_1_33)
_1_35["properties"]["root_required"] = {"type": ["string"]}

_1_36 = copy.deepcopy(_1_35)
_1_36["properties"]["same_subtree"] = {"type": ["string"]}

#: (first microversion, validator), newest first.
SCHEMAS: list[tuple[tuple[int, int], jsonschema.protocols.Validator]] = [
    ((1, 36), validator(_1_36)),
    ((1, 35), validator(_1_35)),
    ((1, 33), validator(_1_33)),
    ((1, 31), validator(_1_31)),
    ((1, 25), validator(_1_25)),
    ((1, 21), validator(_1_21)),
    ((1, 17), validator(_1_17)),
    ((1, 16), validator(_1_16)),
    ((1, 10), validator(_1_10)),
]


def for_version(version: tuple[int, int]) -> jsonschema.protocols.Validator:
    """The schema that applies at ``version`` (1.10 or later)."""
    return next(v for since, v in SCHEMAS if version >= since)
