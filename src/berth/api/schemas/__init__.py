"""JSON Schemas for request bodies and query strings, one module per
resource, and what they all share: ``validator`` compiles a schema once,
and a schema that changes with the microversion is a ``Versioned`` table
that ``pick`` reads (the handlers validate with what it picks, and the
OpenAPI document describes every row of the same table).

jsonschema judges every body and words every refusal, but it costs
a large part of a claim's CPU (bench/journal/2026-12-03.md, "Validating
bodies"). So each ``FastValidator`` first runs the schema compiled to
Python by fastjsonschema, which only ever accepts
what jsonschema accepts (see ``_fast_copy``): when it accepts, the body
is good; when it refuses, jsonschema runs and its verdict and words are
the answer (tests/unit/test_schemas_fast_path.py checks the claim on
every schema here).

jsonschema (draft 2020-12, as upstream validates) counts ``1.0`` and
``1e3`` as integers, but the database drivers bind a float as a float:
psycopg refuses a list holding both, and SQLite keeps a float in an
integer column. So a validator also hands back the body with every
integral float where its schema wants an integer turned into an int
(:meth:`FastValidator.integral`), and no layer below sees one.
"""

from __future__ import annotations

import copy
import importlib
import pkgutil
import re
from collections.abc import Callable, Sequence
from typing import Any

import fastjsonschema
import jsonschema
import referencing.jsonschema

from berth.api import microversion
from berth.domain import common

FORMATS = jsonschema.FormatChecker()
# Upstream accepts any spelling oslo.utils calls uuid-like (no dashes,
# upper case); jsonschema's own "uuid" check would reject those.
FORMATS.checks("uuid")(lambda value: not isinstance(value, str) or common.is_uuid_like(value))

#: Keywords that only annotate: neither validator checks them.
_ANNOTATIONS = frozenset(
    {
        "description",
        "title",
        "examples",
        "$comment",
        "default",
        "deprecated",
        "readOnly",
        "writeOnly",
    }
)
#: Keywords that fastjsonschema (draft 7) checks exactly as jsonschema
#: (draft 2020-12) does on JSON values, read from both sources: bools are
#: never numbers, 1.0 is an integer, lengths count code points, unique
#: items compare 1 and 1.0 equal but not 1 and true, and properties,
#: patternProperties (``re.search``) and additionalProperties share out
#: the keys alike. A schema with any other keyword (``$ref``, ``not``,
#: ``oneOf``, ``const``, ``multipleOf``, ``$schema``...) gets no fast check.
_EXACT = frozenset(
    {
        "type",
        "required",
        "minProperties",
        "maxProperties",
        "minItems",
        "maxItems",
        "uniqueItems",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "additionalProperties",
        "items",
        "properties",
        "patternProperties",
        "anyOf",
        "allOf",
    }
)
#: Patterns with a back reference or a flag or named group (``(?``
#: other than ``(?:``): jsonschema joins a node's patternProperties with
#: ``|`` to find its additional properties, which renumbers groups.
_JOIN_UNSAFE = re.compile(r"\\[1-9]|\(\?(?!:)")


class _NoFastCheck(Exception):
    """The schema uses something the fast check does not copy exactly."""


def _string_check(pattern: str | None, fmt: str | None) -> Callable[[str], bool]:
    """jsonschema's ``pattern`` (``re.search``, where ``$`` also matches
    before a final newline: fastjsonschema would read it as ``\\Z``) and
    ``format`` (``FORMATS``), as one fastjsonschema custom format, which
    it checks on strings only, as jsonschema checks these two."""
    search = re.compile(pattern).search if pattern is not None else None

    def check(value: str) -> bool:
        if search is not None and search(value) is None:
            return False
        return fmt is None or FORMATS.conforms(value, fmt)

    return check


def _fast_copy(schema: Any, formats: dict[str, Callable[[str], bool]]) -> Any:
    """``schema`` as fastjsonschema should compile it: ``pattern`` and
    ``format`` moved into custom formats (added to ``formats``).
    Raises _NoFastCheck for a keyword outside ``_EXACT``."""
    if isinstance(schema, bool):
        return schema
    if not isinstance(schema, dict):
        raise _NoFastCheck(schema)
    out: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _ANNOTATIONS:
            continue
        if key in ("properties", "patternProperties"):
            out[key] = {name: _fast_copy(sub, formats) for name, sub in value.items()}
        elif key in ("additionalProperties", "items"):
            out[key] = _fast_copy(value, formats)
        elif key in ("anyOf", "allOf"):
            out[key] = [_fast_copy(sub, formats) for sub in value]
        elif key == "enum" and all(isinstance(v, str) for v in value):
            # A string equals only a string in both (1 == True does not
            # come into it).
            out[key] = list(value)
        elif key in _EXACT:
            out[key] = copy.deepcopy(value)
        elif key not in ("pattern", "format"):
            raise _NoFastCheck(key)
    patterns = list(schema.get("patternProperties", ()))
    if len(patterns) > 1 and any(_JOIN_UNSAFE.search(p) for p in patterns):
        raise _NoFastCheck(patterns)
    fmt = schema.get("format")
    if fmt is not None and schema.get("type") not in ("string", ["string"]):
        # jsonschema checks a format on any type, fastjsonschema on
        # strings only.
        raise _NoFastCheck(fmt)
    if "pattern" in schema or fmt is not None:
        name = "berth-%d" % len(formats)
        formats[name] = _string_check(schema.get("pattern"), fmt)
        out["format"] = name
    return out


def _compile(schema: Any) -> Callable[[Any], Any] | None:
    """The fast check of ``schema``, or None when it has none."""
    formats: dict[str, Callable[[str], bool]] = {}
    try:
        definition = _fast_copy(schema, formats)
        if isinstance(definition, dict):
            definition["$schema"] = "http://json-schema.org/draft-07/schema#"
        return fastjsonschema.compile(  # type: ignore[no-any-return]
            definition, formats=formats, use_default=False, detailed_exceptions=False
        )
    except Exception:  # _NoFastCheck, or one fastjsonschema cannot compile
        return None


#: Turns a valid value's integral floats into ints, in place, where the
#: schema wants integers; hands back the value.
_Fix = Callable[[Any], Any]


def _to_int(value: Any) -> Any:
    # A valid value here is an int, None, or a float jsonschema found
    # integral (bools are never integers).
    return int(value) if type(value) is float else value


def _fix_items(fix: _Fix) -> _Fix:
    def fix_list(value: Any) -> Any:
        if isinstance(value, list):
            for i, item in enumerate(value):
                value[i] = fix(item)
        return value

    return fix_list


def _fix_if_valid(schema: Any, fix: _Fix) -> _Fix:
    """``fix`` for the values ``schema`` accepts: an ``anyOf`` or
    ``oneOf`` branch, which may not be the one that accepted a value."""
    accepts = jsonschema.validators.validator_for(schema)(schema, format_checker=FORMATS).is_valid
    return lambda value: fix(value) if accepts(value) else value


def _fix_properties(schema: dict[str, Any]) -> _Fix | None:
    """The fix of an object's members, or None when no member may hold
    an integer. A member gets the fix of its ``properties`` entry and of
    each ``patternProperties`` entry whose pattern it matches (as
    jsonschema applies them, by ``re.search``), else that of
    ``additionalProperties``."""
    named = {key: _fixer(sub) for key, sub in schema.get("properties", {}).items()}
    patterns = [
        (re.compile(pattern).search, _fixer(sub))
        for pattern, sub in schema.get("patternProperties", {}).items()
    ]
    other = _fixer(schema.get("additionalProperties", True))
    if (
        other is None
        and all(f is None for f in named.values())
        and all(f is None for _, f in patterns)
    ):
        return None

    def fix_object(value: Any) -> Any:
        if not isinstance(value, dict):
            return value
        for key, member in value.items():
            placed = key in named
            named_fix = named.get(key)
            fixed = member if named_fix is None else named_fix(member)
            for search, fix in patterns:
                if search(key):
                    placed = True
                    fixed = fixed if fix is None else fix(fixed)
            if not placed and other is not None:
                fixed = other(fixed)
            if fixed is not member:
                # The same key: assigning does not disturb the iteration.
                value[key] = fixed
        return value

    return fix_object


def _fixer(schema: Any) -> _Fix | None:
    """The fix of values valid under ``schema`` (see ``_Fix``), or None
    when ``schema`` holds no integer. It follows every keyword that
    places a value except ``$ref`` and ``prefixItems`` (no schema here
    uses them)."""
    if not isinstance(schema, dict):
        return None
    types = schema.get("type", ())
    types = (types,) if isinstance(types, str) else types
    fixes: list[_Fix] = []
    if "integer" in types and "number" not in types:
        fixes.append(_to_int)
    members = _fix_properties(schema)
    if members is not None:
        fixes.append(members)
    items = _fixer(schema.get("items"))
    if items is not None:
        fixes.append(_fix_items(items))
    fixes += [f for sub in schema.get("allOf", ()) if (f := _fixer(sub))]
    fixes += [
        _fix_if_valid(sub, f)
        for key in ("anyOf", "oneOf")
        for sub in schema.get(key, ())
        if (f := _fixer(sub))
    ]
    if not fixes:
        return None
    if len(fixes) == 1:
        return fixes[0]

    def fix_all(value: Any) -> Any:
        for fix in fixes:
            value = fix(value)
        return value

    return fix_all


#: Not compiled yet (fastjsonschema compiles on first use, per process,
#: which costs too much for every import of the package; a server
#: compiles them all before it forks, see :func:`compile_all`).
_PENDING: Any = object()
#: Every validator made, for :func:`compile_all`.
_MADE: list[FastValidator] = []


class FastValidator:
    """A schema's checks: jsonschema's verdicts and words, fastjsonschema's
    speed for the bodies it accepts."""

    __slots__ = ("_judge", "_fast", "_fix")

    def __init__(self, judge: jsonschema.protocols.Validator) -> None:
        self._judge = judge
        self._fast: Callable[[Any], Any] | None = _PENDING
        self._fix = _fixer(judge.schema)

    @property
    def schema(self) -> referencing.jsonschema.Schema:
        """The JSON Schema (as the OpenAPI document shows it)."""
        return self._judge.schema

    def _fast_check(self) -> Callable[[Any], Any] | None:
        if self._fast is _PENDING:
            self._fast = _compile(self._judge.schema)
        return self._fast

    def _fast_accepts(self, instance: Any) -> bool:
        fast = self._fast_check()
        if fast is None:
            return False
        try:
            fast(instance)
        except Exception:  # a refusal, or a surprise: jsonschema judges
            return False
        return True

    def validate(self, instance: Any) -> None:
        """Return when ``instance`` is valid; else raise the
        ``ValidationError`` upstream names: ``jsonschema.validate`` ranks
        every error with ``best_match`` (the shallowest, and among
        siblings the greatest path: of two bad properties, the later
        name), where the validator's own ``validate`` raises the first
        one it finds."""
        if not self._fast_accepts(instance):
            error = jsonschema.exceptions.best_match(self._judge.iter_errors(instance))
            if error is not None:
                raise error

    def integral(self, instance: Any) -> Any:
        """``instance``, which this schema accepts, with each float that
        stands where the schema wants an integer (jsonschema accepts
        ``1.0`` and ``1e3`` there) turned into an int, in place; floats
        where the schema wants any number stay as they are."""
        return instance if self._fix is None else self._fix(instance)

    def is_valid(self, instance: Any) -> bool:
        """Whether jsonschema finds ``instance`` valid."""
        return self._fast_accepts(instance) or self._judge.is_valid(instance)


#: (first microversion, validator) per row, oldest first: each row holds
#: from its microversion until the next row's.
Versioned = Sequence[tuple[str, FastValidator]]


def validator(schema: dict[str, Any], kind: type[FastValidator] = FastValidator) -> FastValidator:
    """A compiled validator for ``schema`` (compile once, at import),
    checking ``"format": "uuid"`` as upstream does: a ``kind`` (a
    subclass) may word its refusals otherwise."""
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    made = kind(cls(schema, format_checker=FORMATS))
    _MADE.append(made)
    return made


def compile_all() -> int:
    """Compile every validator's fast check now (in a server's master,
    before it forks: the workers then share them instead of each paying
    a few milliseconds on each schema's first body); how many there are.
    Imports every resource's schemas first."""
    for module in pkgutil.iter_modules(__path__):
        importlib.import_module("%s.%s" % (__name__, module.name))
    for made in _MADE:
        made._fast_check()
    return len(_MADE)


def pick(table: Versioned, version: tuple[int, int]) -> FastValidator:
    """The validator of ``table``'s newest row that ``version`` has
    reached (the first row below it: routes gate such requests)."""
    chosen = table[0][1]
    for since, checker in table[1:]:
        if not microversion.at_least(version, since):
            break
        chosen = checker
    return chosen
