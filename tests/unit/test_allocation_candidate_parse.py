"""Query parsing for allocation candidates: values, versions, messages."""

from __future__ import annotations

import pytest

from berth.api import microversion
from berth.domain import common, errors
from berth.domain.allocation_candidate import parse

AGG1 = "11111111-1111-1111-1111-111111111111"
AGG2 = "22222222-2222-2222-2222-222222222222"


def at(version: str) -> parse.Wants:
    """The microversion test of a request at ``version``."""
    return microversion.wants(microversion.parse(version))


def _pairs(qs: str) -> list[tuple[str, str]]:
    return [tuple(kv.split("=", 1)) for kv in qs.split("&")]  # type: ignore[misc]


def test_resources_parse() -> None:
    assert parse.parse_resources("VCPU:2,MEMORY_MB:1024") == {"VCPU": 2, "MEMORY_MB": 1024}


@pytest.mark.parametrize(
    "value,message",
    [
        ("", "Got: empty string."),
        ("VCPU", "Got: VCPU."),
        ("DISK_GB:500,", "Got: ."),
        ("VCPU:fred", "Requested resource VCPU expected positive integer amount. Got: fred."),
        ("VCPU:-2", "Requested resource VCPU requires amount >= 1. Got: -2."),
        ("VCPU:0", "requires amount >= 1. Got: 0."),
    ],
)
def test_resources_errors(value: str, message: str) -> None:
    with pytest.raises(errors.BadRequest) as exc:
        parse.parse_resources(value)
    assert message in exc.value.message


def test_traits_forms_by_version() -> None:
    req, forb = parse.parse_required(["A,!B"], at("1.22"))
    assert req == (frozenset({"A"}),) and forb == {"B"}
    with pytest.raises(errors.BadRequest, match="HW_CPU_X86_VMX,CUSTOM_MAGIC"):
        parse.parse_required(["!B"], at("1.21"))
    with pytest.raises(errors.BadRequest, match="only supported since"):
        parse.parse_required(["in:A,B"], at("1.38"))
    req, _ = parse.parse_required(["in:A,B", "C"], at("1.39"))
    assert req == (frozenset({"A", "B"}), frozenset({"C"}))
    # Before 1.39 the last value wins.
    req, _ = parse.parse_required(["A", "C"], at("1.38"))
    assert req == (frozenset({"C"}),)
    with pytest.raises(errors.BadRequest, match="does not support forbidden"):
        parse.parse_required(["in:A,!B"], at("1.39"))
    with pytest.raises(errors.BadRequest, match="Got an empty trait in: A,,B"):
        parse.parse_required(["A,,B"], at("1.39"))


def test_member_of_forms_by_version() -> None:
    req, forb = parse.parse_member_of(["in:%s,%s" % (AGG1, AGG2), "!" + AGG1], "", at("1.32"))
    assert req == (frozenset({AGG1, AGG2}),) and forb == {AGG1}
    with pytest.raises(errors.BadRequest, match="Multiple member_of1 "):
        parse.parse_member_of([AGG1, AGG2], "1", at("1.23"))
    with pytest.raises(errors.BadRequest, match="Forbidden member_of "):
        parse.parse_member_of(["!" + AGG1], "", at("1.31"))
    with pytest.raises(errors.BadRequest, match="must be prefixed"):
        parse.parse_member_of([AGG1 + "," + AGG2], "", at("1.32"))
    with pytest.raises(errors.BadRequest, match="valid UUID"):
        parse.parse_member_of(["in:"], "", at("1.32"))


def test_uuid_like() -> None:
    assert common.is_uuid_like(AGG1)
    assert common.is_uuid_like(AGG1.replace("-", "").upper())
    assert not common.is_uuid_like("not-a-uuid")
    assert not common.is_uuid_like("")


def test_groups_in_order_with_suffixes() -> None:
    groups, wide = parse.parse_request(
        _pairs(
            "resources_B=VCPU:1&resources=DISK_GB:5&resources1=VF:1&group_policy=isolate&limit=3"
        ),
        at("1.33"),
    )
    assert [g.suffix for g in groups] == ["_B", "", "1"]
    assert wide.limit == 3 and wide.group_policy == "isolate"
    # Named suffixes only count from 1.33.
    groups, _ = parse.parse_request(_pairs("resources=VCPU:1&resources_B=X:1"), at("1.32"))
    assert [g.suffix for g in groups] == [""]


def test_group_policy_required_for_two_groups() -> None:
    with pytest.raises(errors.BadRequest, match='"group_policy" parameter'):
        parse.parse_request(_pairs("resources1=VCPU:1&resources2=VCPU:1"), at("1.25"))


def test_orphans_before_1_36() -> None:
    with pytest.raises(errors.BadRequest, match="orphaned traits keys: required, required1"):
        parse.parse_request(
            _pairs("required=A&required1=B&resources2=X:1&group_policy=none"), at("1.25")
        )
    with pytest.raises(errors.BadRequest, match="orphaned member_of keys"):
        parse.parse_request(_pairs("member_of=%s&resources1=X:1" % AGG1), at("1.25"))


def test_resourceless_rules_from_1_36() -> None:
    with pytest.raises(errors.QueryMissingValue):
        parse.parse_request(_pairs("required1=A"), at("1.36"))
    with pytest.raises(errors.QueryBadValue, match=r"bad group\(s\) - \['2'\]"):
        parse.parse_request(_pairs("resources1=X:1&required2=A&group_policy=none"), at("1.36"))
    with pytest.raises(errors.QueryBadValue, match="Real suffixes"):
        parse.parse_request(_pairs("resources1=X:1&same_subtree=1,3"), at("1.36"))
    with pytest.raises(errors.QueryBadValue, match="Empty string"):
        parse.parse_request(_pairs("resources1=X:1&same_subtree=1,,2"), at("1.36"))
    groups, wide = parse.parse_request(
        _pairs("resources1=X:1&required2=A&same_subtree=1,2&group_policy=none"), at("1.36")
    )
    assert not groups[1].resources
    assert wide.same_subtrees == (frozenset({"1", "2"}),)


def test_conflicting_traits() -> None:
    with pytest.raises(errors.BadRequest, match=r"required1: \(A\)"):
        parse.parse_request(_pairs("resources1=X:1&required1=A,!A"), at("1.25"))
    # An any-of set conflicts only when all of it is forbidden.
    parse.parse_request(_pairs("resources=X:1&required=in:A,B&required=!A"), at("1.39"))


def test_root_required() -> None:
    _, wide = parse.parse_request(_pairs("resources=X:1&root_required=A,!B"), at("1.35"))
    assert wide.root_required == {"A"} and wide.root_forbidden == {"B"}
    with pytest.raises(errors.QueryDuplicateKey):
        parse.parse_request(_pairs("resources=X:1&root_required=A&root_required=B"), at("1.35"))
    with pytest.raises(errors.QueryBadValue, match="root_required: A"):
        parse.parse_request(_pairs("resources=X:1&root_required=A,!A"), at("1.35"))
    with pytest.raises(errors.BadRequest, match="only supported since"):
        parse.parse_request(_pairs("resources=X:1&root_required=in:A,B"), at("1.39"))


def test_in_tree() -> None:
    assert parse.parse_in_tree(" %s " % AGG1) == AGG1
    with pytest.raises(errors.BadRequest, match="format of uuid"):
        parse.parse_in_tree("bogus")
