"""A refusal of the fast check (``berth.api.schemas.FastValidator``)
reads word for word as jsonschema words it, in ``json_body``'s 400 too;
where the fast check is not the judge (a keyword it does not compile, a
surprise of its own) jsonschema's verdict stands; the change feed's
query refuses a non-mapping in one line. The fast check agrees with
jsonschema on bodies drawn from every schema: test_schemas_fast_path.py.
"""

from __future__ import annotations

import importlib
import importlib.metadata
from typing import Any

import falcon
import jsonschema
import pytest
from falcon import testing

from berth.api import schemas, util
from berth.api.errors import HTTPProblem
from berth.api.schemas import allocation, inventory, pick, trait, validator
from berth.api.schemas import resource_class as rc_schema
from berth.domain.errors import DomainError

#: The refusals read as the installed jsonschema words them: 4.21 says an
#: emptiness check "should be non-empty" (before, "is too short"), and 4.23
#: shows the schema in its own key order (before, sorted).
_JSONSCHEMA = tuple(int(part) for part in importlib.metadata.version("jsonschema").split(".")[:2])
_NON_EMPTY = "should be non-empty" if _JSONSCHEMA >= (4, 21) else "is too short"
_TRAIT_ITEMS = (
    "{'type': 'string', 'minLength': 1, 'maxLength': 255}"
    if _JSONSCHEMA >= (4, 23)
    else "{'maxLength': 255, 'minLength': 1, 'type': 'string'}"
)


_U = "2290d4af-9e6e-400b-9d65-1ee01376f71a"


# -- refusals, word for word ---------------------------------------------

_CLAIM = pick(allocation.PUT_SCHEMAS, (1, 38))


def _claim(**changes: Any) -> dict[str, Any]:
    body = {
        "allocations": {_U: {"resources": {"VCPU": 1}}},
        "project_id": "p",
        "user_id": "u",
        "consumer_generation": None,
        "consumer_type": "INSTANCE",
    }
    body.update(changes)
    return body


@pytest.mark.parametrize(
    "checker,body,words",
    [
        (
            _CLAIM,
            _claim(allocations={_U: {"resources": {"VCPU": True}}}),
            "True is not of type 'integer'",
        ),
        (
            _CLAIM,
            _claim(allocations={_U: {"resources": {"VCPU": 0}}}),
            "0 is less than the minimum of 1",
        ),
        (
            _CLAIM,
            _claim(allocations={_U: {"resources": {"vcpu": 1}}}),
            "'vcpu' does not match any of the regexes: '^[A-Z0-9_]+$'",
        ),
        (_CLAIM, _claim(consumer_type="instance"), "'instance' does not match '^[A-Z0-9_]+$'"),
        (_CLAIM, {"allocations": {}}, "'project_id' is a required property"),
        (
            inventory.PUT_ALL_V,
            {"resource_provider_generation": 1, "inventories": {"VCPU": {"total": 2147483648}}},
            "2147483648 is greater than the maximum of 2147483647",
        ),
        (
            trait.SET_PROVIDER_TRAITS_V,
            {"traits": [""], "resource_provider_generation": 0},
            "'' " + _NON_EMPTY,
        ),
        (
            pick(allocation.PUT_SCHEMAS, (1, 0)),
            {"allocations": [{"resource_provider": {"uuid": "harry"}, "resources": {"VCPU": 1}}]},
            "'harry' is not a 'uuid'",
        ),
    ],
)
def test_refusal_reads_as_jsonschema_words_it(
    checker: schemas.FastValidator, body: Any, words: str
) -> None:
    with pytest.raises(jsonschema.ValidationError) as caught:
        checker.validate(body)
    assert caught.value.message == words
    with pytest.raises(jsonschema.ValidationError) as judged:
        checker._judge.validate(body)
    assert str(caught.value) == str(judged.value)


@pytest.mark.parametrize(
    "body",
    [
        {"name": "CUSTOM_X\n"},  # "$" before a final newline
        {"name": "CUSTOM_" + "A" * 248},
    ],
)
def test_dollar_keeps_jsonschema_meaning(body: dict[str, Any]) -> None:
    # fastjsonschema alone reads "$" as the very end; the copy it compiles
    # checks the pattern with re.search, as jsonschema does (the handler
    # refuses a final newline itself: rc_schema.check_strict).
    assert rc_schema.NAME_BODY_V._fast_accepts(body)
    rc_schema.NAME_BODY_V.validate(body)


def _put(app_body: bytes, checker: schemas.FastValidator) -> testing.Result:
    app = falcon.App()

    class Conf:
        class berth:  # the attribute path json_body reads
            max_json_depth = 32

    class Resource:
        def on_put(self, req: falcon.Request, resp: falcon.Response) -> None:
            req.context.state = type("State", (), {"conf": Conf})
            try:
                util.json_body(req, checker)
            except HTTPProblem as problem:
                resp.status = problem.status
                resp.text = problem.detail
                return
            resp.status = 204

    app.add_route("/x", Resource())
    return testing.TestClient(app).simulate_put(
        "/x", body=app_body, headers={"content-type": "application/json"}
    )


def test_json_body_says_jsonschemas_words() -> None:
    bad = _put(b'{"traits": [1], "resource_provider_generation": 0}', trait.SET_PROVIDER_TRAITS_V)
    assert bad.status_code == 400
    assert bad.text == (
        "JSON does not validate: 1 is not of type 'string'"
        "\n\nFailed validating 'type' in schema['properties']"
        "['traits']['items']:\n    " + _TRAIT_ITEMS + "\n\nOn instance"
        "['traits'][0]:\n    1"
    )
    good = _put(
        b'{"traits": ["X"], "resource_provider_generation": 0}', trait.SET_PROVIDER_TRAITS_V
    )
    assert good.status_code == 204


# -- when the fast check is not the judge ---------------------------------


def test_a_fast_refusal_jsonschema_accepts_is_accepted() -> None:
    checker = validator({"type": "object"})

    def refuses(body: Any) -> Any:
        raise TypeError("a surprise of the fast check")

    checker._fast = refuses
    checker.validate({"a": 1})
    assert checker.is_valid({"a": 1})
    with pytest.raises(jsonschema.ValidationError):
        checker.validate([])


@pytest.mark.parametrize(
    "schema,good,bad",
    [
        ({"not": {"type": "string"}}, 1, "a"),
        ({"oneOf": [{"type": "integer"}, {"minimum": 0}]}, -1, 1),
        ({"$defs": {"n": {"type": "integer"}}, "$ref": "#/$defs/n"}, 1, "a"),
        ({"const": 1}, 1, True),
        ({"enum": [1, "a"]}, 1, True),
        ({"format": "uuid"}, 1, "harry"),  # a format on any type
        (
            {
                "patternProperties": {"(a)\\1": {"type": "integer"}, "b": {}},
                "additionalProperties": False,
            },
            {"aa": 1},
            {"c": 1},
        ),
    ],
)
def test_other_keywords_are_left_to_jsonschema(schema: dict[str, Any], good: Any, bad: Any) -> None:
    checker = validator(schema)
    assert schemas._compile(schema) is None
    checker.validate(good)
    with pytest.raises(jsonschema.ValidationError):
        checker.validate(bad)


@pytest.mark.parametrize("query", [None, [None], "after=1", 7])
def test_the_feed_query_refuses_a_non_mapping_in_one_line(query: Any) -> None:
    # Hypothesis found these: an in-process caller handing the change
    # feed's validator something other than a mapping got a TypeError.
    from berth.api.schemas import change

    with pytest.raises(DomainError) as caught:
        change.QUERY.validate(query)
    assert str(caught.value) == (
        "the query must be name=value parameters, not %s" % type(query).__name__
    )
