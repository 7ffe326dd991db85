"""Pure rules of allocations: consumer uuid spelling and schema choice."""

from __future__ import annotations

import uuid as uuidlib

import jsonschema
import pytest
from hypothesis import given as given_any
from hypothesis import strategies as st
from oslo_utils import uuidutils

from berth.api.schemas import allocation as schema
from berth.api.schemas import pick, validator
from berth.domain.common import normalize_uuid

CANON = "75d0f5f7-75d9-458c-b204-f90ac91604ec"


@pytest.mark.parametrize(
    "given", [CANON, CANON.upper(), CANON.replace("-", ""), "{%s}" % CANON, "urn:uuid:" + CANON]
)
def test_uuid_spellings_upstream_accepts(given: str) -> None:
    assert normalize_uuid(given) == CANON


@pytest.mark.parametrize("given", ["not-a-uuid", "", CANON + "0", CANON.replace("-", "+")])
def test_uuid_spellings_rejected(given: str) -> None:
    assert normalize_uuid(given) is None


def _parsed(value: str) -> str | None:
    """The spelling found by parsing, as oslo.utils accepts uuids."""
    return str(uuidlib.UUID(value)) if uuidutils.is_uuid_like(value) else None


@given_any(
    st.one_of(
        st.uuids().map(str),
        st.uuids().map(lambda u: str(u).upper()),
        st.uuids().map(lambda u: str(u) + "\n"),
        st.text(alphabet="0123456789abcdefABCDEF-{}:nru \n", min_size=30, max_size=46),
    )
)
def test_uuid_spelling_without_parsing_agrees_with_parsing(value: str) -> None:
    """A canonical spelling is taken as it is; every other text is
    parsed; both give what parsing alone gives."""
    assert normalize_uuid(value) == _parsed(value)


def _valid(version: tuple[int, int], data: object) -> bool:
    try:
        pick(schema.PUT_SCHEMAS, version).validate(data)
    except jsonschema.ValidationError:
        return False
    return True


def test_put_schema_per_microversion() -> None:
    rp = {CANON: {"resources": {"VCPU": 1}}}
    owner = {"project_id": "p", "user_id": "u"}
    listed = {"allocations": [{"resource_provider": {"uuid": CANON}, "resources": {"VCPU": 1}}]}
    assert _valid((1, 0), listed)
    assert not _valid((1, 8), listed)
    assert _valid((1, 8), {**listed, **owner})
    assert _valid((1, 12), {"allocations": rp, **owner})
    assert not _valid((1, 12), {"allocations": {}, **owner})
    gen = {"consumer_generation": None}
    assert _valid((1, 28), {"allocations": {}, **owner, **gen})
    assert not _valid((1, 33), {"allocations": rp, **owner, **gen, "mappings": {"a": [CANON]}})
    assert _valid((1, 34), {"allocations": rp, **owner, **gen, "mappings": {"a": [CANON]}})
    assert not _valid((1, 38), {"allocations": rp, **owner, **gen})
    assert _valid((1, 38), {"allocations": rp, **owner, **gen, "consumer_type": "INSTANCE"})
    assert not _valid(
        (1, 38),
        {
            "allocations": {CANON: {"resources": {"VCPU": 2**31}}},
            **owner,
            **gen,
            "consumer_type": "INSTANCE",
        },
    )


def test_integral_amounts_and_generations_become_ints() -> None:
    # jsonschema counts 1.0 and 1e3 as integers; what it hands on holds
    # ints, in every shape of body (the list before 1.12, POST's dict of
    # consumers, a reshape's allocations).
    rp = CANON
    put = pick(schema.PUT_SCHEMAS, (1, 39))
    body = {
        "allocations": {rp: {"generation": 3.0, "resources": {"VCPU": 1.0, "DISK_GB": 5}}},
        "project_id": "p",
        "user_id": "u",
        "consumer_generation": 2.0,
        "consumer_type": "INSTANCE",
    }
    put.validate(body)
    got = put.integral(body)
    assert got is body
    assert repr(got["allocations"][rp]) == repr(
        {"generation": 3, "resources": {"VCPU": 1, "DISK_GB": 5}}
    )
    assert type(got["consumer_generation"]) is int
    old = {"allocations": [{"resource_provider": {"uuid": rp}, "resources": {"VCPU": 1e3}}]}
    assert pick(schema.PUT_SCHEMAS, (1, 0)).integral(old)["allocations"][0]["resources"] == {
        "VCPU": 1000
    }
    post = {str(uuidlib.UUID(int=1)): {**body, "consumer_generation": None}}
    pick(schema.POST_SCHEMAS, (1, 39)).integral(post)
    assert repr(post).count("1.0") == 0 and "'VCPU': 1," in repr(post)


def test_an_integer_under_any_of_counts_where_its_branch_accepts() -> None:
    checker = validator(
        {
            "type": "array",
            "items": {"anyOf": [{"type": "integer", "minimum": 5}, {"type": "number"}]},
        }
    )
    assert repr(checker.integral([1.0, 6.0, 2.5, 7])) == "[1.0, 6, 2.5, 7]"
