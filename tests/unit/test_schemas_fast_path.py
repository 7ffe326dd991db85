"""The fast check of every schema (``berth.api.schemas.FastValidator``)
never accepts what jsonschema refuses, and a refusal reads exactly as
jsonschema words it (the words checked one by one, and the schemas
jsonschema alone judges: test_schemas_refusals.py).

Bodies are drawn from each schema: valid ones, near misses (a bound
crossed by one, a pattern's match with a final newline, uuids in every
spelling, a bool for an integer, 1.0 for 1, a required key left out, a
key no pattern names) and arbitrary JSON in place of any part.
"""

from __future__ import annotations

import importlib
import pkgutil
import uuid
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from berth.api import schemas
from berth.api.openapi_document import berth_operations, operations
from berth.api.schemas import validator
from berth.domain.errors import DomainError

# -- every validator Berth builds ------------------------------------------


def _validators() -> dict[str, schemas.FastValidator]:
    """Each ``FastValidator`` the schema modules and the OpenAPI document
    hold (alone or in a ``Versioned`` table), by a readable name."""
    modules = [
        importlib.import_module("berth.api.schemas." + m.name)
        for m in pkgutil.iter_modules(schemas.__path__)
    ]
    found: dict[int, tuple[str, schemas.FastValidator]] = {}
    for module in [*modules, operations, berth_operations]:
        for name, value in vars(module).items():
            rows: list[tuple[str, Any]] = []
            if isinstance(value, schemas.FastValidator):
                rows = [(name, value)]
            elif (
                isinstance(value, tuple)
                and value
                and all(
                    isinstance(row, tuple)
                    and len(row) == 2
                    and isinstance(row[1], schemas.FastValidator)
                    for row in value
                )
            ):
                rows = [("%s[%s]" % (name, since), v) for since, v in value]
            for label, checker in rows:
                found.setdefault(
                    id(checker), ("%s.%s" % (module.__name__.rsplit(".", 1)[1], label), checker)
                )
    return dict(found.values())


VALIDATORS = _validators()
NAMES = sorted(VALIDATORS)


def test_every_schema_is_found_and_has_a_fast_check() -> None:
    # The claim's, the inventories' and the candidates' query among them.
    assert {
        "allocation.PUT_SCHEMAS[1.38]",
        "inventory.PUT_ALL_V",
        "allocation_candidate.SCHEMAS[1.36]",
    } <= set(NAMES)
    assert len(NAMES) >= 50
    assert [n for n in NAMES if schemas._compile(VALIDATORS[n].schema) is None] == []


# -- bodies drawn from a schema ------------------------------------------

_U = "2290d4af-9e6e-400b-9d65-1ee01376f71a"
#: Strings that sit on some schema's edge.
_STRINGS = [
    "",
    "a",
    "\n",
    "VCPU",
    "VCPU\n",
    "vcpu",
    "CUSTOM_X",
    "CUSTOM_X\n",
    "CUSTOM_",
    "INSTANCE",
    "none",
    "isolate",
    "all",
    "unknown",
    "1",
    "0",
    "01",
    "5\n",
    "1.0",
    _U,
    _U + "\n",
    _U.upper(),
    "{%s}" % _U,
    "urn:uuid:" + _U,
    _U.replace("-", ""),
    _U[:-1],
    "resources",
    "resources1",
    "resources_A",
    "resources1\n",
    "in_tree",
    "x" * 256,
]
_ATOMS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([0, 1, -1, 1.0, 0.5, 2147483647, 2147483648, 3.5e38]),
    st.text(max_size=8),
    st.sampled_from(_STRINGS),
)
#: Any JSON value (no NaN or infinity: orjson refuses them).
_JUNK = st.recursive(
    _ATOMS,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.one_of(st.text(max_size=6), st.sampled_from(_STRINGS)), inner, max_size=3
        )
    ),
    max_leaves=8,
)


def _coin(draw: Any, chance: float) -> bool:
    """True with about ``chance`` (shrinks to False)."""
    return bool(draw(st.integers(0, 99)) >= 100 - round(chance * 100))


def _uuid_string(draw: Any, odd: bool) -> str:
    value = draw(st.uuids())
    spellings = [str(value), value.hex, str(value).upper(), "{%s}" % value, "urn:uuid:%s" % value]
    if odd:
        spellings += [
            str(value)[:-1],
            str(value) + "0",
            str(value) + "\n",
            str(value).replace("a", "g").replace("1", "g"),
            " " + str(value),
            str(value)[:8] + "-" + value.hex,
        ]
    return str(draw(st.sampled_from(spellings)))


def _string(draw: Any, schema: dict[str, Any], rate: float) -> str:
    odd = _coin(draw, rate)
    if "enum" in schema:
        text = str(draw(st.sampled_from(schema["enum"])))
        return text + draw(st.sampled_from(["", "\n", "x"])) if odd else text
    if schema.get("format") == "uuid":
        return _uuid_string(draw, odd)
    pattern = schema.get("pattern")
    if pattern is not None:
        text = str(draw(st.from_regex(pattern, fullmatch=not odd)))
        if odd and _coin(draw, 0.3):
            text += "\n"
    else:
        text = str(draw(st.text(max_size=10) if not odd else st.sampled_from(_STRINGS)))
    longest = schema.get("maxLength")
    if longest is not None and _coin(draw, 0.2):
        size = draw(st.integers(longest - 1, longest + (1 if odd else 0)))
        text = (text + "A" * size)[: max(size, len(text) if not odd else 0)]
    if schema.get("minLength") and odd and _coin(draw, 0.3):
        text = ""
    return text


def _number(draw: Any, schema: dict[str, Any], rate: float, integer: bool) -> Any:
    low, high = schema.get("minimum"), schema.get("maximum")
    if _coin(draw, rate):
        edges = [True, False, 0.5, -1, 2**63, 3.5e38, "1"]
        edges += [low - 1, low - 0.5] if low is not None else []
        edges += [high + 1, high * 1.0001] if high is not None else []
        return draw(st.sampled_from(edges))
    if integer:
        value = draw(
            st.integers(low if low is not None else -(2**40), high if high is not None else 2**40)
        )
        # 1.0 is an integer to both validators.
        return float(value) if abs(value) < 2**50 and _coin(draw, 0.1) else value
    return draw(
        st.floats(low, high, allow_nan=False, allow_infinity=False)
        | st.integers(
            int(low) if low is not None else -(2**40), int(high) if high is not None else 2**40
        )
    )


def _object(draw: Any, schema: dict[str, Any], rate: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    required = schema.get("required", [])
    for key, sub in schema.get("properties", {}).items():
        wanted = not _coin(draw, rate) if key in required else _coin(draw, 0.5)
        if wanted:
            out[key] = _value(draw, sub, rate)
    least = 1 if schema.get("minProperties") else 0
    for pattern, sub in schema.get("patternProperties", {}).items():
        for _ in range(draw(st.integers(least, 3))):
            key = str(draw(st.from_regex(pattern, fullmatch=True)))
            if _coin(draw, rate):
                key = draw(st.sampled_from([key + "\n", key.lower(), key + "-", "", key[1:]]))
            out[key] = _value(draw, sub, rate)
    if _coin(draw, rate):
        extra = schema.get("additionalProperties", True)
        key = draw(st.one_of(st.text(max_size=6), st.sampled_from(_STRINGS)))
        out[key] = _value(draw, extra, rate) if isinstance(extra, dict) else draw(_JUNK)
    if _coin(draw, rate / 2):
        out = {}
    return out


def _array(draw: Any, schema: dict[str, Any], rate: float) -> list[Any]:
    items = schema.get("items", True)
    out = [
        _value(draw, items, rate) for _ in range(draw(st.integers(schema.get("minItems", 0), 3)))
    ]
    if schema.get("uniqueItems") and not _coin(draw, rate):
        unique: list[Any] = []
        for item in out:
            if item not in unique or any(type(item) is not type(u) for u in unique if u == item):
                unique.append(item)
        out = (
            unique if all(type(a) is type(b) or a != b for a in unique for b in unique) else out[:1]
        )
    elif out and _coin(draw, rate):
        # A repeat, or an equal of another type (1 and 1.0, 1 and true).
        first = out[0]
        twin = float(first) if isinstance(first, int) and not isinstance(first, bool) else first
        out.append(draw(st.sampled_from([first, twin, True, 1])))
    if schema.get("minItems") and _coin(draw, rate / 2):
        out = []
    return out


_SHAPED = ("properties", "patternProperties", "additionalProperties", "required", "minProperties")


def _value(draw: Any, schema: Any, rate: float) -> Any:
    """A value for ``schema``: valid-ish, off by ``rate``."""
    if isinstance(schema, bool) or _coin(draw, rate / 3):
        return draw(_JUNK)
    if "anyOf" in schema:
        return _value(draw, draw(st.sampled_from(schema["anyOf"])), rate)
    kinds = schema.get("type")
    if kinds is None:
        kinds = (
            "object"
            if any(k in schema for k in _SHAPED)
            else "array"
            if "items" in schema
            else "string"
            if "pattern" in schema or "format" in schema
            else None
        )
        if kinds is None:
            return draw(_JUNK)
    kind = draw(st.sampled_from(kinds if isinstance(kinds, list) else [kinds]))
    if kind == "string":
        return _string(draw, schema, rate)
    if kind in ("integer", "number"):
        return _number(draw, schema, rate, kind == "integer")
    if kind == "object":
        return _object(draw, schema, rate)
    if kind == "array":
        return _array(draw, schema, rate)
    return draw(st.none() if kind == "null" else st.booleans())


@st.composite
def bodies(draw: Any, schema: Any) -> Any:
    """Bodies for ``schema``: from valid (rate 0) to mostly wrong."""
    rate = draw(st.sampled_from([0.0, 0.05, 0.2, 0.5]))
    return _value(draw, schema, rate)


# -- the property --------------------------------------------------------


def _refusal(validate: Any, body: Any) -> str:
    """The words of the error ``validate(body)`` raises."""
    with pytest.raises(jsonschema.ValidationError) as caught:
        validate(body)
    return str(caught.value)


def _verdicts(checker: schemas.FastValidator, body: Any) -> None:
    judge = checker._judge
    valid = judge.is_valid(body)
    # The one claim the design rests on: a fast accept is a real one.
    if checker._fast_accepts(body):
        assert valid, body
    assert checker.is_valid(body) is valid
    if valid:
        checker.validate(body)
        return
    if type(checker) is not schemas.FastValidator:
        # One that words its refusals itself (change.QUERY, in plain
        # words): jsonschema's verdict, its own words.
        with pytest.raises(DomainError):
            checker.validate(body)
        return
    assert _refusal(checker.validate, body) == _refusal(
        lambda b: jsonschema.validate(b, judge.schema, format_checker=judge.format_checker), body
    )


_PROPERTY = settings(
    max_examples=100, deadline=None, database=None, suppress_health_check=list(HealthCheck)
)
#: Schemas that accept anything (the body nobody reads).
_OPEN = {n for n in NAMES if not set(VALIDATORS[n].schema) - {"description"}}


def _check_bodies(name: str, examples: int, fixed: bool = False) -> None:
    checker = VALIDATORS[name]
    seen: set[bool] = set()

    def draw(count: int, fixed: bool) -> None:
        @settings(_PROPERTY, max_examples=count, derandomize=fixed)
        @given(bodies(checker.schema))
        def agree(body: Any) -> None:
            _verdicts(checker, body)
            seen.add(checker._judge.is_valid(body))

        agree()

    draw(examples, fixed)
    want = {True} if name in _OPEN else {True, False}
    if seen != want:
        # The fixed draw was all of one verdict (it happens, rarely, for
        # a schema with few ways to be wrong): draw more, anew.
        draw(4 * examples, False)
    # The property is only as good as its bodies: they reach both
    # verdicts.
    assert seen == want


@pytest.mark.parametrize("name", NAMES)
def test_fast_check_agrees_with_jsonschema(name: str) -> None:
    # The same bodies on every run (the stress run below draws anew).
    # Hypothesis draws its simplest bodies first (mostly valid ones), so
    # 25 could all be valid for a schema with few ways to be wrong
    # (resource_provider.LIST_QUERIES[1.18], on some seeds): 50 reach
    # both verdicts for every schema.
    _check_bodies(name, 50, fixed=True)


@pytest.mark.stress
@pytest.mark.parametrize("name", NAMES)
def test_fast_check_agrees_with_jsonschema_long(name: str) -> None:
    _check_bodies(name, 150)


# -- the fast check on its own ---------------------------------------------


def test_fast_check_leaves_the_body_alone() -> None:
    # Compiled without fastjsonschema's defaults: nothing is filled in.
    checker = validator({"type": "object", "properties": {"a": {"type": "integer", "default": 1}}})
    body: dict[str, Any] = {}
    checker.validate(body)
    assert checker._fast_accepts(body)
    assert body == {}


def test_uuid_spellings_match_the_format_checker() -> None:
    checker = validator({"type": "string", "format": "uuid"})
    value = uuid.uuid4()
    for text in [
        str(value),
        value.hex,
        str(value).upper(),
        "{%s}" % value,
        "urn:uuid:%s" % value,
        str(value)[:-1],
        "harry",
        "",
    ]:
        assert checker._fast_accepts(text) is schemas.FORMATS.conforms(text, "uuid"), text


def test_compile_all_leaves_no_schema_to_compile_later() -> None:
    import berth.api.schemas as schemas_package

    assert schemas_package.compile_all() == len(schemas_package._MADE)
    made = {id(checker) for checker in schemas_package._MADE}
    assert all(id(checker) in made for checker in VALIDATORS.values())
    assert all(checker._fast is not schemas_package._PENDING for checker in schemas_package._MADE)
