"""The error format and the one mapping table."""

from __future__ import annotations

import inspect

from berth.api import errors
from berth.domain import errors as de
from support.plain_words import plain_line


def test_every_domain_error_has_a_row():
    classes = [
        c for _, c in inspect.getmembers(de, inspect.isclass) if issubclass(c, de.DomainError)
    ]
    missing = [c.__name__ for c in classes if c not in errors.DOMAIN_ERRORS]
    assert missing == []


def test_codes_are_upstream_values():
    assert errors.CONCURRENT_UPDATE == "placement.concurrent_update"
    assert errors.INVENTORY_INUSE == "placement.inventory.inuse"
    assert errors.DEFAULT == "placement.undefined_code"
    assert len(set(errors.ALL_CODES)) == len(errors.ALL_CODES)


def test_problem_body_shape():
    body = errors.HTTPProblem(409, "gen moved", errors.CONCURRENT_UPDATE).to_dict(
        "req-1", with_code=True
    )
    assert body == {
        "errors": [
            {
                "status": 409,
                "title": "Conflict",
                "code": "placement.concurrent_update",
                "request_id": "req-1",
                "detail": "There was a conflict when trying to complete your "
                "request.\n\n gen moved  ",
            }
        ]
    }


def test_domain_mapping_uses_most_specific_class():
    assert errors.status_and_code(de.ConcurrentUpdate("x")) == (409, "placement.concurrent_update")
    assert errors.status_and_code(de.NotFound("x")) == (404, "placement.undefined_code")


def test_for_people_is_one_line_without_the_schema_dump() -> None:
    from berth.api.errors import for_people

    detail = (
        "The server could not comply with the request since it is "
        "either malformed or otherwise incorrect.\n\n Invalid query "
        "string parameters: 'resource' does not match any of the "
        "regexes: '^in_tree([a-zA-Z0-9_-]{1,64})?$', "
        "'^resources([a-zA-Z0-9_-]{1,64})?$'\n\nFailed validating "
        "'additionalProperties' in schema:\n    {'type': 'object'}\n\n"
        "On instance:\n    {'resource': 'VCPU:1'}  "
    )
    assert for_people(detail) == ("unknown query parameter 'resource' (did you mean resources?)")
    assert for_people(detail.replace("'resource'", "'limt'"), known=["limit"]) == (
        "unknown query parameter 'limt' (did you mean limit?)"
    )
    two = detail.replace("'resource' does", "'limt', 'resource' do")
    assert for_people(two, known=["limit"]) == (
        "unknown query parameter 'limt' (did you mean limit?)"
    )
    plain = (
        "The server could not comply with the request since it is "
        "either malformed or otherwise incorrect.\n\n No such trait(s): "
        "FOO.  "
    )
    assert for_people(plain) == "No such trait(s): FOO."
    unexpected = (
        "Bad.\n\n Invalid query string parameters: Additional "
        "properties are not allowed ('zzz' was unexpected)\n\nmore"
    )
    assert for_people(unexpected) == "unknown query parameter 'zzz'"


def test_detail_is_on_one_line_as_webob_formats_it() -> None:
    body = errors.HTTPProblem(
        400,
        "JSON does not validate: 'x' is not a "
        "'uuid'\n\nFailed validating 'format'\r\n in "
        "<b>x</b><!-- y --><br/>z",
    ).to_dict(None, with_code=False)
    assert body["errors"][0]["detail"] == (
        "The server could not comply with the request since it is either "
        "malformed or otherwise incorrect.\n\n JSON does not validate: 'x' "
        "is not a 'uuid'  Failed validating 'format'  in x y \nz  "
    )


def test_for_people_leaves_out_the_one_line_schema_dump() -> None:
    detail = errors.HTTPProblem(
        400,
        "JSON does not validate: 'abc' is not a "
        "'uuid'\n\nFailed validating 'format' in "
        "schema:\n    {}",
    ).to_dict(None, with_code=False)
    assert errors.for_people(detail["errors"][0]["detail"]) == (
        "the request body does not validate: 'abc' is not a 'uuid'"
    )


def test_for_people_says_what_a_valid_number_is() -> None:
    # GET /berth/fit?resources=VCPU:4&limit=abc answers upstream's words.
    detail = errors.HTTPProblem(
        400,
        "Invalid query string parameters: 'abc' does not match "
        "'^[1-9][0-9]*$'\n\nFailed validating 'pattern' in "
        "schema['properties']['limit']:\n    {'type': ['integer', 'string'],"
        " 'pattern': '^[1-9][0-9]*$'}\n\nOn instance['limit']:\n    'abc'",
    ).to_dict(None, with_code=False)["errors"][0]["detail"]
    assert plain_line(errors.for_people(detail)) == (
        "limit must be a whole number from 1 up, not 'abc'"
    )


def test_for_people_names_the_nearest_class_or_trait() -> None:
    names = ["VCPU", "MEMORY_MB", "HW_CPU_X86_AVX2", "CUSTOM_FAST"]
    klass = errors.HTTPProblem(
        400, "Invalid resource class in resources parameter: No such resource class VCPUS."
    ).to_dict(None, with_code=False)["errors"][0]["detail"]
    assert plain_line(errors.for_people(klass, names=names)) == (
        "Invalid resource class in resources parameter: No such resource "
        "class VCPUS (did you mean VCPU?)."
    )
    trait = errors.HTTPProblem(400, "No such trait(s): CUSTOM_FAT.").to_dict(None, with_code=False)[
        "errors"
    ][0]["detail"]
    assert plain_line(errors.for_people(trait, names=names)) == (
        "No such trait(s): CUSTOM_FAT (did you mean CUSTOM_FAST?)."
    )
    # Nothing near: upstream's line as it is.
    far = trait.replace("FAT", "ZZZZZZZZ")
    assert errors.for_people(far, names=names) == ("No such trait(s): CUSTOM_ZZZZZZZZ.")
