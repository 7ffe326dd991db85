"""JSON Schemas for request bodies and query strings, one module per
resource, and what they all share: ``validator`` compiles a schema once,
and a schema that changes with the microversion is a ``Versioned`` table
that ``pick`` reads (the handlers validate with what it picks, and the
OpenAPI document describes every row of the same table).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jsonschema

from berth.api import microversion
from berth.domain import common

FORMATS = jsonschema.FormatChecker()
# Upstream accepts any spelling oslo.utils calls uuid-like (no dashes,
# upper case); jsonschema's own "uuid" check would reject those.
FORMATS.checks("uuid")(lambda value: not isinstance(value, str)
                       or common.is_uuid_like(value))

#: (first microversion, validator) per row, oldest first: each row holds
#: from its microversion until the next row's.
Versioned = Sequence[tuple[str, jsonschema.protocols.Validator]]


def validator(schema: dict[str, Any]) -> jsonschema.protocols.Validator:
    """A compiled validator for ``schema`` (compile once, at import),
    checking ``"format": "uuid"`` as upstream does."""
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=FORMATS)


def pick(table: Versioned, version: tuple[int, int]
         ) -> jsonschema.protocols.Validator:
    """The validator of ``table``'s newest row that ``version`` has
    reached (the first row below it: routes gate such requests)."""
    chosen = table[0][1]
    for since, checker in table[1:]:
        if not microversion.at_least(version, since):
            break
        chosen = checker
    return chosen
