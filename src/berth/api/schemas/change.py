"""JSON Schema for the query string of ``GET /berth/changes``."""

from __future__ import annotations

from typing import Any

from berth.api.schemas import validator
from berth.db import events

#: One kind, or several separated by commas.
_KINDS = "^(%s)(,(%s))*$" % (("|".join(k.replace(".", r"\.")
                                        for k in events.KINDS),) * 2)

#: The most trees one ``tree`` filter names: a request line naming them
#: all stays far below the 8 KiB limit.
MAX_TREES = 100

_CHANGES: dict[str, Any] = {
    "type": "object",
    "properties": {
        "after": {"type": "string", "minLength": 1, "maxLength": 255},
        "kind": {"type": "string", "pattern": _KINDS},
        # Provider uuids, comma separated (each checked by the handler).
        "tree": {"type": "string",
                 "pattern": "^[^,]+(,[^,]+){0,%d}$" % (MAX_TREES - 1)},
        "consumer": {"type": "string", "format": "uuid"},
        "project": {"type": "string", "minLength": 1, "maxLength": 255},
        "limit": {"type": "string", "pattern": "^[1-9][0-9]{0,4}$"},
    },
    "required": ["after"],
    "additionalProperties": False,
}

#: GET /berth/changes query strings (no microversion: a Berth endpoint).
QUERY = validator(_CHANGES)

#: The most events one page returns (whole writes: one may exceed it).
MAX_LIMIT = 10_000
DEFAULT_LIMIT = 1000
