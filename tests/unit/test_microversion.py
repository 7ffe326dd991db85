from __future__ import annotations

import pytest

from berth.api import microversion


def test_versions_are_contiguous_from_1_0_to_1_39():
    assert microversion.VERSIONS == ["1.%d" % i for i in range(40)]


@pytest.mark.parametrize(
    "header,expected",
    [
        ({}, (1, 0)),
        ({"openstack-api-version": "placement 1.14"}, (1, 14)),
        ({"openstack-api-version": "placement latest"}, (1, 39)),
        ({"openstack-api-version": "compute 2.1, placement 1.5"}, (1, 5)),
        ({"openstack-api-version": "compute 2.1"}, (1, 0)),
    ],
)
def test_extract(header, expected):
    assert tuple(microversion.extract(header)) == expected


@pytest.mark.parametrize(
    "value,status",
    [
        ("placement 1.40", 406),
        ("placement 0.9", 406),
        ("placement 2.0", 406),
        ("placement pony", 400),
        ("placement 1.2.3", 400),
        ("placement 1.", 400),
    ],
)
def test_bad_values(value, status):
    with pytest.raises(microversion.VersionError) as info:
        microversion.extract({"openstack-api-version": value})
    assert info.value.status == status
