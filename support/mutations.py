"""Hostile values, and the mutations that put them into a valid JSON body.

``mutations`` turns one valid body into many hostile ones: every value
replaced by every value in ``HOSTILE`` (types, bounds, lengths, unicode,
nesting), every key removed, renamed to an odd key or duplicated, and an
extra field added at every level. ``HOSTILE_SEGMENTS`` and
``HOSTILE_QUERY_VALUES`` do the same for paths and query strings. The
hostile-input campaign (``support/campaign.py``) sends them.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import quote

_LONG = 10_000
#: Values that stress a type, a bound, a length, unicode or nesting.
HOSTILE: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    1,
    2**31 - 1,
    2**31,
    -(2**31) - 1,
    2**53 + 1,
    2**63 - 1,
    2**63,
    2**64 - 1,
    -(2**63),
    1.5,
    -0.0,
    1e308,
    -1e308,
    5e-324,
    3.4028235e38,
    float("nan"),
    float("inf"),
    "",
    " ",
    "n" * 200,
    "n" * 201,
    "a" * 255,
    "a" * 256,
    "\u00e9" * 255,
    "\U0001f600" * 255,
    "\U0001f600" * 256,
    "A" * _LONG,
    "CUSTOM_" + "A" * 248,
    "CUSTOM_" + "A" * 249,
    "\ud800",
    "\udfff",
    "\uffff",
    "\U0001f600" * 64,
    "e\u0301" * 3,
    "\u202eevil",
    "\u200b",
    "\u2028",
    "x\ty\n",
    "NaN",
    "../..",
    [],
    {},
    [1, 1],
    {"a": 1},
    [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],
]
#: Odd keys: empty, long, unicode, control characters, lone surrogates.
ODD_KEYS = [
    "",
    " ",
    "k" * 300,
    "\ud800",
    "\u00e9",
    "\U0001f600",
    "a\nb",
    "VCPU\n",
    "CUSTOM_" + "X" * 300,
]
#: The subset used at the older microversions of an endpoint.
SHORT = [None, "", -1, 2**31, 2**64 - 1, 1e308, float("nan"), "\ud800", "A" * _LONG, {}, []]


def dumps(body: Any) -> bytes:
    """JSON as a hostile client would write it: NaN and Infinity as bare
    words and lone surrogates as escapes, which strict encoders refuse."""
    return json.dumps(body, allow_nan=True).encode()


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield prefix + (key,)
            yield from _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield prefix + (i,)
            yield from _paths(value, prefix + (i,))


def _copy(body: Any) -> Any:
    return json.loads(json.dumps(body))


def _set(body: Any, path: tuple[Any, ...], value: Any) -> Any:
    out = _copy(body)
    node = out
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return out


def _parent(body: Any, path: tuple[Any, ...]) -> Any:
    node = body
    for step in path[:-1]:
        node = node[step]
    return node


Mutation = tuple[str, Callable[[Any], bytes]]


def _remove(path: tuple[Any, ...]) -> Callable[[Any], bytes]:
    def apply(body: Any) -> bytes:
        out = _copy(body)
        del _parent(out, path)[path[-1]]
        return dumps(out)

    return apply


def _rename(path: tuple[Any, ...], key: str) -> Callable[[Any], bytes]:
    def apply(body: Any) -> bytes:
        out = _copy(body)
        node = _parent(out, path)
        node[key] = node.pop(path[-1])
        return dumps(out)

    return apply


def _extra(path: tuple[Any, ...]) -> Callable[[Any], bytes]:
    def apply(body: Any) -> bytes:
        out = _copy(body)
        _parent(out, path)["zz_extra"] = 1
        return dumps(out)

    return apply


def _duplicate(key: Any, value: Any) -> Callable[[Any], bytes]:
    # The same key twice: the raw text carries a first, hostile copy.
    def apply(body: Any) -> bytes:
        return (
            "{%s: %s, %s" % (json.dumps(key), json.dumps(value), dumps(body).decode()[1:])
        ).encode()

    return apply


def _replace(path: tuple[Any, ...], value: Any) -> Callable[[Any], bytes]:
    return lambda body: dumps(_set(body, path, value))


def mutations(body: Any, values: list[Any]) -> list[Mutation]:
    """(label, transform) for every mutation of ``body``'s shape; each
    transform takes a fresh valid body of that shape (current
    generations) and returns the hostile raw JSON."""
    out: list[Mutation] = []
    if isinstance(body, dict):
        out.append(("extra-top", lambda b: dumps({**b, "zz_extra": 1})))
    for path in _paths(body):
        label = "/".join(map(str, path))
        out += [("%s=%d" % (label, i), _replace(path, value)) for i, value in enumerate(values)]
        if isinstance(_parent(body, path), dict):
            out.append((label + ":missing", _remove(path)))
            out += [("%s:key=%r" % (label, key[:12]), _rename(path, key)) for key in ODD_KEYS]
            out.append((label + ":extra", _extra(path)))
            if len(path) == 1:
                out.append((label + ":dup", _duplicate(path[-1], values[0])))
    return out


#: Hostile path segments (for every route with a parameter).
HOSTILE_SEGMENTS = [
    "",
    "%00",
    "a" * 300,
    quote("\u00e9"),
    quote("\U0001f600"),
    "%ff%fe",
    "%2e%2e",
    quote("\u202e"),
    "..",
    "9" * 40,
    "CUSTOM_" + "A" * 300,
    "00000000-0000-0000-0000-00000000000g",
    str(uuid.uuid4()).upper(),
    str(uuid.uuid4()).replace("-", ""),
]
HOSTILE_QUERY_VALUES = [
    "",
    "%00",
    "A" * 300,
    "VCPU:99999999999999999999",
    "VCPU:-1",
    "VCPU:2147483648",
    "VCPU:0",
    ":",
    ",",
    "in:",
    "!",
    "!!X",
    "VCPU:1,VCPU:1",
    "%ff",
    "%F0%9F%98%80",
    "CUSTOM_" + "A" * 300,
    "in:" + ",".join(["A"] * 500),
    "1e99",
    "NaN",
    "-1",
    "99999999999999999999",
    "in:" + "X" * 300,
    "VCPU:1&resources=VCPU:1",
]
