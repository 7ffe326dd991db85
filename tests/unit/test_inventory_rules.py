"""Pure inventory rules: capacity per microversion, schema bounds, names."""

from __future__ import annotations

import pytest

from berth.api.errors import HTTPProblem
from berth.api.schemas import inventory as inv_schema
from berth.api.schemas import pick, reshaper
from berth.api.schemas import resource_class as rc_schema
from berth.api.schemas import trait as trait_schema
from berth.domain import inventory
from berth.domain.capacity import Inventory


@pytest.mark.parametrize(
    "total,reserved,ratio,old,new",
    [
        (10, 0, 1.0, None, None),
        (10, 9, 1.0, None, None),
        (10, 10, 1.0, "or equal", None),
        (10, 11, 1.0, "or equal", "greater than total"),
        (10, 0, 0.0, "or equal", None),
        (10, 0, -1.0, "or equal", "greater than total"),
        (10, 5, 0.1, "or equal", None),  # int(5 * 0.1) == 0
    ],
)
def test_capacity_problem(
    total: int, reserved: int, ratio: float, old: str | None, new: str | None
) -> None:
    inv = Inventory(total=total, reserved=reserved, allocation_ratio=ratio)
    got_old = inventory.capacity_problem(inv, reserved_can_be_total=False)
    got_new = inventory.capacity_problem(inv, reserved_can_be_total=True)
    assert (got_old is None) == (old is None)
    assert (got_new is None) == (new is None)
    if old:
        assert old in got_old  # type: ignore[operator]
    if new:
        assert got_new == "The reserved value is greater than total."


def test_make_inventory_fills_defaults_and_ignores_extras() -> None:
    inv = inventory.make_inventory({"total": 5, "resource_provider_generation": 3})
    assert inv == Inventory(
        total=5, reserved=0, min_unit=1, max_unit=2147483647, step_size=1, allocation_ratio=1.0
    )


@pytest.mark.parametrize(
    "field,value,ok",
    [
        ("total", 2147483647, True),
        ("total", 2147483648, False),
        ("total", 0, False),
        ("reserved", 0, True),
        ("reserved", -1, False),
        ("min_unit", 0, False),
        ("max_unit", 2147483648, False),
        ("step_size", 0, False),
        ("allocation_ratio", 3.4e38, True),
        ("allocation_ratio", 3.40282e39, False),
        ("allocation_ratio", -2.0, True),
        ("total", True, False),
        ("total", "5", False),
        ("colour", 1, False),
    ],
)
def test_put_one_schema_bounds(field: str, value: object, ok: bool) -> None:
    body = {"resource_provider_generation": 0, "total": 10, field: value}
    assert inv_schema.PUT_ONE_V.is_valid(body) is ok


def test_post_schema_needs_class_not_generation() -> None:
    assert inv_schema.POST_V.is_valid({"resource_class": "VCPU", "total": 1})
    assert not inv_schema.POST_V.is_valid({"total": 1})
    assert not inv_schema.POST_V.is_valid({"resource_class": "vcpu", "total": 1})


def test_put_all_schema() -> None:
    good = {"resource_provider_generation": 1, "inventories": {"VCPU": {"total": 2}}}
    assert inv_schema.PUT_ALL_V.is_valid(good)
    assert not inv_schema.PUT_ALL_V.is_valid(
        {"resource_provider_generation": 1, "inventories": {"VCPU": {"total": 2147483648}}}
    )
    assert not inv_schema.PUT_ALL_V.is_valid({"inventories": {}})


@pytest.mark.parametrize(
    "name,ok",
    [
        ("VCPU", True),
        ("CUSTOM_A_1", True),
        ("VCPU\n", False),
        ("", False),
        ("vcpu", False),
        ("V CPU", False),
    ],
)
def test_is_class_name(name: str, ok: bool) -> None:
    assert inv_schema.is_class_name(name) is ok


def test_custom_class_names_are_strict() -> None:
    rc_schema.check_strict("CUSTOM_GOLD")
    with pytest.raises(HTTPProblem) as err:
        rc_schema.check_strict("CUSTOM_GOLD\n")
    assert err.value.status == 400
    assert not rc_schema.NAME_BODY_V.is_valid({"name": "VCPU"})
    assert not rc_schema.NAME_BODY_V.is_valid({"name": "CUSTOM_" + "A" * 249})
    assert rc_schema.NAME_BODY_V.is_valid({"name": "CUSTOM_" + "A" * 248})


def test_trait_schemas() -> None:
    assert trait_schema.CUSTOM_TRAIT_V.is_valid("CUSTOM_X")
    assert not trait_schema.CUSTOM_TRAIT_V.is_valid("HW_CPU_X86_SSE")
    assert not trait_schema.SET_PROVIDER_TRAITS_V.is_valid(
        {"traits": [""], "resource_provider_generation": 0}
    )
    assert not trait_schema.LIST_QUERY_V.is_valid({"colour": "red"})


def test_integral_counts_become_ints_and_ratios_stay_floats() -> None:
    record = {
        "total": 8.0,
        "reserved": 1e3,
        "min_unit": 1,
        "max_unit": 8.0,
        "step_size": 1.0,
        "allocation_ratio": 2.0,
    }
    body = {
        "resource_provider_generation": 4.0,
        "inventories": {"VCPU": dict(record), "vcpu": dict(record)},
    }
    inv_schema.PUT_ALL_V.integral(body)
    want = (
        "{'total': 8, 'reserved': 1000, 'min_unit': 1, 'max_unit': 8, "
        "'step_size': 1, 'allocation_ratio': 2.0}"
    )
    assert repr(body["inventories"]["VCPU"]) == want
    # A key that names no class is refused later, but checked as a record.
    assert repr(body["inventories"]["vcpu"]) == want
    assert type(body["resource_provider_generation"]) is int
    one = {"resource_provider_generation": 1.0, **record}
    assert repr(inv_schema.PUT_ONE_V.integral(one)) == (
        "{'resource_provider_generation': 1, " + want[1:]
    )
    reshape = {
        "inventories": {
            "75d0f5f7-75d9-458c-b204-f90ac91604ec": {
                "resource_provider_generation": 1.0,
                "inventories": {"VCPU": dict(record)},
            }
        },
        "allocations": {},
    }
    pick(reshaper.SCHEMAS, (1, 39)).integral(reshape)
    assert "8.0" not in repr(reshape) and "'allocation_ratio': 2.0" in repr(reshape)
