"""Pure logic behind the provider and aggregate endpoints."""

from __future__ import annotations

import jsonschema
import pytest

from berth.api import schemas
from berth.api.schemas import aggregate as agg_schema
from berth.api.schemas import pick
from berth.api.schemas import resource_provider as rp_schema
from berth.domain.aggregate import storable

U = "2290d4af-9e6e-400b-9d65-1ee01376f71a"


@pytest.mark.parametrize(
    "value,ok",
    [
        (U, True),
        (U.upper(), True),
        (U.replace("-", ""), True),
        ("{%s}" % U, True),
        ("urn:uuid:" + U, True),
        (U[:-1], False),
        (U + "0", False),
        ("2290d4af-9e6e-400b-9d65-1ee01376f71g", False),
        ("22-90d4af9e6e400b9d651ee01376f71a", True),
        ("", False),
        ("harry", False),
        (12, True),  # not a string: left to the "type" keyword
    ],
)
def test_uuid_like(value: object, ok: bool) -> None:
    # The "uuid" format every schema is compiled with (berth.api.schemas).
    assert schemas.FORMATS.conforms(value, "uuid") is ok


@pytest.mark.parametrize(
    "version,allowed,refused",
    [
        ((1, 0), ["name", "uuid"], ["member_of", "resources"]),
        ((1, 3), ["member_of"], ["resources"]),
        ((1, 4), ["resources"], ["in_tree"]),
        ((1, 14), ["in_tree"], ["required"]),
        ((1, 18), ["required"], ["spam"]),
        ((1, 39), ["required", "in_tree", "member_of"], ["spam"]),
    ],
)
def test_list_query_grows_per_version(
    version: tuple[int, int], allowed: list[str], refused: list[str]
) -> None:
    check = pick(rp_schema.LIST_QUERIES, version)
    for key in allowed:
        value = U if key in ("uuid", "in_tree") else "x"
        check.validate({key: value})
    for key in refused:
        with pytest.raises(jsonschema.ValidationError):
            check.validate({key: "x"})


def test_put_schema_requires_name_and_refuses_uuid() -> None:
    with pytest.raises(jsonschema.ValidationError):
        pick(rp_schema.PUT_BODIES, (1, 14)).validate({"parent_provider_uuid": U})
    with pytest.raises(jsonschema.ValidationError):
        pick(rp_schema.PUT_BODIES, (1, 0)).validate({"name": "a", "uuid": U})
    pick(rp_schema.PUT_BODIES, (1, 14)).validate({"name": "a", "parent_provider_uuid": None})


def test_aggregate_schemas() -> None:
    listed = pick(agg_schema.PUT_BODIES, (1, 1))
    listed.validate([U, U.replace("-", "")])
    with pytest.raises(jsonschema.ValidationError):
        listed.validate([U, U])
    with pytest.raises(jsonschema.ValidationError):
        pick(agg_schema.PUT_BODIES, (1, 19)).validate({"aggregates": [U]})


def test_storable_keeps_short_spellings_and_dedups() -> None:
    assert storable([U.upper(), "urn:uuid:" + U, "{%s}" % U, U]) == [U.upper(), U]
    assert storable([]) == []
