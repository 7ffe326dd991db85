"""The query of the change feed, in both its forms (``GET /berth/changes``
and its watch form, ``berth.serve.watch``): its JSON Schema, and what a
validated query asks for (:func:`feed_query`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jsonschema

from berth.api.errors import did_you_mean, must_be, shown
from berth.api.schemas import FastValidator, validator
from berth.db import events
from berth.domain import change, common, errors
from berth.domain.limits import MAX_TREES

#: One kind, or several separated by commas.
_KINDS = "^(%s)(,(%s))*$" % (("|".join(k.replace(".", r"\.") for k in events.KINDS),) * 2)

_CHANGES: dict[str, Any] = {
    "type": "object",
    "properties": {
        "after": {"type": "string", "minLength": 1, "maxLength": 255},
        "kind": {"type": "string", "pattern": _KINDS},
        # Provider uuids, comma separated (each checked by the handler).
        "tree": {"type": "string", "pattern": "^[^,]+(,[^,]+){0,%d}$" % (MAX_TREES - 1)},
        "consumer": {"type": "string", "format": "uuid"},
        "project": {"type": "string", "minLength": 1, "maxLength": 255},
        "limit": {"type": "string", "pattern": "^[1-9][0-9]{0,4}$"},
    },
    "required": ["after"],
    "additionalProperties": False,
}

#: What a valid value of each parameter is, in plain words: a refusal on
#: this Berth-only surface says that, never the schema or a pattern.
_EXPECTED = {
    "after": "a position from an earlier answer, or 0",
    "tree": "provider uuids, comma separated (at most %d)" % MAX_TREES,
    "consumer": "a consumer uuid",
    "project": "a project id of 1 to 255 characters",
    "limit": "a whole number from 1 to 99999",
}


def _kinds() -> str:
    """The kinds, short enough for one line: kinds of one prefix share
    it, and prefixes with the same kinds share those
    (``inventories/traits/aggregates.set``)."""
    by_prefix: dict[str, list[str]] = {}
    for kind in events.KINDS:
        prefix, _, suffix = kind.rpartition(".")
        by_prefix.setdefault(prefix, []).append(suffix)
    by_suffixes: dict[str, list[str]] = {}
    for prefix, suffixes in by_prefix.items():
        by_suffixes.setdefault("/".join(suffixes), []).append(prefix)
    return ", ".join("%s.%s" % ("/".join(p), s) if p != [""] else s for s, p in by_suffixes.items())


def _plain(exc: jsonschema.ValidationError, params: Any) -> str:
    """The one line that says what is wrong with the query ``params``."""
    if not isinstance(params, dict):
        # Only a caller in-process can hand over anything but a mapping.
        return "the query must be name=value parameters, not %s" % (type(params).__name__)
    extras = sorted(str(p) for p in set(params) - set(_CHANGES["properties"]))
    if extras:
        extra = extras[0]
        return "unknown query parameter %r%s" % (extra, did_you_mean(extra, _CHANGES["properties"]))
    if not exc.path:
        return "after is required: %s" % _EXPECTED["after"]
    name = str(exc.path[0])
    value = str(params[name])
    if name == "kind":
        bad = next((k for k in value.split(",") if k not in events.KINDS), value)
        return "unknown kind %s; kinds: %s" % (shown(bad, 30), _kinds())
    return must_be(name, _EXPECTED[name], value)


class _PlainValidator(FastValidator):
    """The feed query's validator: a refusal is QueryBadValue in plain
    words (``_plain``)."""

    __slots__ = ()

    def validate(self, instance: Any) -> None:
        try:
            super().validate(instance)
        except jsonschema.ValidationError as exc:
            raise errors.QueryBadValue(_plain(exc, instance)) from None


#: GET /berth/changes query strings (no microversion: a Berth endpoint).
QUERY = validator(_CHANGES, _PlainValidator)

#: The most events one page returns (whole writes: one may exceed it).
MAX_LIMIT = 10_000
DEFAULT_LIMIT = 1000


#: The policy rule of reading the feed, in either form.
POLICY = "berth:changes:list"


def feed_query(
    params: dict[str, str], authorize: Callable[[str], None]
) -> tuple[events.Filters, tuple[str, ...] | None, int]:
    """The filters (narrowed by ``change.feed_filters``: ``authorize``
    raises Forbidden), trees and page size of a validated feed query:
    both forms'."""
    kinds = frozenset(params["kind"].split(",")) if "kind" in params else None
    filters = change.feed_filters(kinds, params.get("consumer"), params.get("project"), authorize)
    limit = min(int(params.get("limit", DEFAULT_LIMIT)), MAX_LIMIT)
    return filters, _trees(params.get("tree")), limit


def _trees(value: str | None) -> tuple[str, ...] | None:
    """The provider uuids of the ``tree`` filter (comma separated), or
    QueryBadValue (400) naming one that is not a uuid."""
    if value is None:
        return None
    found = []
    for item in value.split(","):
        uuid = common.normalize_uuid(item)
        if uuid is None:
            raise errors.QueryBadValue(
                "Invalid tree %r: expected provider uuids, comma separated "
                "(at most %d)." % (item, MAX_TREES)
            )
        found.append(uuid)
    return tuple(found)
