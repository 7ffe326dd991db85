"""Hostile input never gets a 500, always gets a Placement-format 4xx, and
changes nothing: bodies that are not JSON, values hostile to a database,
odd queries, paths and headers, and capacities past what a reader
survives (the poison pill). Runs on every backend (upstream answers
several of these with a 500, some only on PostgreSQL). A number of the
wrong kind in an integer field: test_hostile_input_numbers.py.

Covers the request checks of ``berth.api.util`` and ``berth.api.schemas``,
``berth.api.errors``, and the domain writes behind them."""

from __future__ import annotations

import pytest

from berth.db import tables as t
from support.api_setup import SERVICE
from tests.functional.conftest import RP, snapshot

CONSUMER = "7f6e5d4c-3b2a-4918-8776-655443322110"

# Raw bodies that are not acceptable JSON for any endpoint.
BAD_BODIES = {
    "deep": b"[" * 5000 + b"]" * 5000,
    "deep_objects": b'{"a":' * 200 + b"1" + b"}" * 200,
    "nan": b'{"name": NaN}',
    "infinity": b'{"name": Infinity, "uuid": -Infinity}',
    "lone_surrogate": b'{"name": "\\ud800"}',
    "huge_int": b'{"name": "x", "generation": 123456789012345678901234567890}',
    "nul": b'{"name": "a\\u0000b"}',
    "not_utf8": b'{"name": "\xff\xfe"}',
    "truncated": b'{"name": ',
    "empty": b"",
}

WRITES = [
    ("POST", "/resource_providers"),
    ("PUT", "/resource_providers/%s" % RP),
    ("PUT", "/resource_providers/%s/inventories" % RP),
    ("POST", "/resource_providers/%s/inventories" % RP),
    ("PUT", "/resource_providers/%s/inventories/VCPU" % RP),
    ("PUT", "/resource_providers/%s/traits" % RP),
    ("PUT", "/resource_providers/%s/aggregates" % RP),
    ("PUT", "/allocations/%s" % CONSUMER),
    ("POST", "/allocations"),
    ("POST", "/reshaper"),
    ("POST", "/resource_classes"),
]

# Well-formed JSON whose values are hostile for a database.
BAD_VALUES = [
    ("POST", "/resource_providers", {"name": "x" * 201}),
    ("POST", "/resource_providers", {"name": "nul\u0000name"}),
    ("POST", "/resource_providers", {"name": "ok", "uuid": "not-a-uuid"}),
    ("POST", "/resource_providers", {"name": "ok", "uuid": RP + "0"}),
    ("POST", "/resource_providers", {"name": "ok", "parent_provider_uuid": "x" * 300}),
    (
        "PUT",
        "/resource_providers/%s/inventories" % RP,
        {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 2**31}}},
    ),
    (
        "PUT",
        "/resource_providers/%s/inventories" % RP,
        {"resource_provider_generation": 2**63, "inventories": {"VCPU": {"total": 1}}},
    ),
    (
        "PUT",
        "/resource_providers/%s/inventories" % RP,
        {"resource_provider_generation": 0, "inventories": {"X" * 300: {"total": 1}}},
    ),
    (
        "PUT",
        "/resource_providers/%s/traits" % RP,
        {"resource_provider_generation": 0, "traits": ["CUSTOM_" + "A" * 300]},
    ),
    (
        "PUT",
        "/allocations/%s" % CONSUMER,
        {
            "allocations": {RP: {"resources": {"VCPU": 2**40}}},
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": None,
        },
    ),
    (
        "PUT",
        "/allocations/%s" % CONSUMER,
        {
            "allocations": {RP: {"resources": {"VCPU": 1}}},
            "project_id": "p" * 300,
            "user_id": "u",
            "consumer_generation": None,
        },
    ),
    (
        "PUT",
        "/allocations/%s" % CONSUMER,
        {
            "allocations": {RP: {"resources": {"VCPU": 1}}},
            "project_id": "p\u0000",
            "user_id": "u",
            "consumer_generation": None,
        },
    ),
    (
        "PUT",
        "/allocations/not-a-uuid",
        {
            "allocations": {RP: {"resources": {"VCPU": 1}}},
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": None,
        },
    ),
    ("PUT", "/resource_classes/CUSTOM_" + "A" * 300, None),
    ("PUT", "/traits/CUSTOM_" + "A" * 300, None),
]

BAD_QUERIES = [
    "/allocation_candidates?resources=VCPU:99999999999999999999",
    "/allocation_candidates?resources=VCPU:1&limit=99999999999999999999",
    "/allocation_candidates?resources=VCPU:1&member_of=%s" % ("x" * 5000),
    "/allocation_candidates?resources=%s:1" % ("X" * 300),
    "/allocation_candidates?resources=VCPU:1&required=%s" % ("A" * 300),
    "/allocation_candidates?resources=VCPU:1&in_tree=nope",
    "/resource_providers?name=%s" % ("n" * 300),
    "/resource_providers?uuid=nope",
    "/resource_providers?resources=VCPU:2147483648",
    "/usages?project_id=%s" % ("p" * 300),
    "/traits?name=in:%s" % ("T" * 300),
    "/resource_providers/%s" % ("u" * 300),
    "/resource_providers?name=%ff%fe",
]


def assert_clean_4xx(r):
    assert 400 <= r.status_code < 500, (r.status_code, r.text[:300])
    body = r.json()
    assert body["errors"][0]["status"] == r.status_code
    assert "Traceback" not in r.text


@pytest.mark.parametrize("method,path", WRITES)
@pytest.mark.parametrize("name", list(BAD_BODIES))
def test_bad_bodies(client, db, hostile_world, method, path, name):
    r = client.request(
        method, path, content=BAD_BODIES[name], headers={"content-type": "application/json"}
    )
    assert_clean_4xx(r)
    assert snapshot(db) == hostile_world


@pytest.mark.parametrize("method,path,body", BAD_VALUES)
def test_bad_values(client, db, hostile_world, method, path, body):
    r = client.request(method, path, json=body)
    assert_clean_4xx(r)
    assert snapshot(db) == hostile_world


@pytest.mark.parametrize("path", BAD_QUERIES)
def test_bad_queries(client, hostile_world, path):
    # Some of these are legitimate questions with an empty answer upstream
    # (a name nobody has); what matters is that none fails or leaks.
    r = client.get(path)
    if r.status_code != 200:
        assert_clean_4xx(r)


def test_many_megabytes(client, db, hostile_world):
    body = b'{"name": "' + b"x" * (12 * 1024 * 1024) + b'"}'
    r = client.post(
        "/resource_providers", content=body, headers={"content-type": "application/json"}
    )
    assert r.status_code == 413
    assert snapshot(db) == hostile_world


def test_long_headers(client, hostile_world):
    r = client.get("/resource_providers", headers={"x-junk": "j" * 20000})
    assert r.status_code == 431


# --- No accepted write may break a read (the poison pill) -------------------

POISON = b"18446744073709551616"  # 2**64: upstream's schema lets it through

POISON_WRITES = [
    (
        "POST",
        "/resource_providers/%s/inventories" % RP,
        b'{"resource_class": "DISK_GB", "total": 8, "allocation_ratio": %s}',
    ),
    (
        "PUT",
        "/resource_providers/%s/inventories" % RP,
        b'{"resource_provider_generation": 1, "inventories": '
        b'{"VCPU": {"total": 8, "allocation_ratio": %s}}}',
    ),
    (
        "PUT",
        "/resource_providers/%s/inventories/VCPU" % RP,
        b'{"resource_provider_generation": 1, "total": 8, "allocation_ratio": %s}',
    ),
    (
        "PUT",
        "/resource_providers/%s/inventories/VCPU" % RP,
        b'{"resource_provider_generation": 1, "total": 2147483647, "allocation_ratio": %s}',
    ),
]


# 4194305 overflows only with the largest total.
@pytest.mark.parametrize(
    "method,path,body,ratio",
    [
        (*write, ratio)
        for write in POISON_WRITES
        for ratio in (POISON, b"3.4e38", b"-1e300", b"4194305")
        if ratio != b"4194305" or b"2147483647" in write[2]
    ],
)
def test_overflowing_capacity_is_refused(client, db, hostile_world, method, path, body, ratio):
    r = client.request(
        method, path, content=body % ratio, headers={"content-type": "application/json"}
    )
    assert_clean_4xx(r)
    assert r.status_code == 400
    assert "capacity" in r.json()["errors"][0]["detail"]
    assert snapshot(db) == hostile_world
    r = client.get("/allocation_candidates?resources=VCPU:1")
    assert r.status_code == 200, r.text
    assert len(r.json()["allocation_requests"]) == 1


def test_largest_capacity_is_accepted_and_readable(client, hostile_world):
    # (2**31 - 1) * 4194304 = 2**53 - 4194304: just inside the bound.
    r = client.put(
        "/resource_providers/%s/inventories/VCPU" % RP,
        json={"resource_provider_generation": 1, "total": 2147483647, "allocation_ratio": 4194304},
    )
    assert r.status_code == 200, r.text
    r = client.get("/allocation_candidates?resources=VCPU:1")
    assert r.status_code == 200, r.text
    summary = r.json()["provider_summaries"][RP]["resources"]["VCPU"]
    assert summary["capacity"] == 2147483647 * 4194304


def test_a_stored_poison_row_does_not_break_reads(client, db, hostile_world):
    # A database written by something else may already hold such a row:
    # reads answer, with the capacity held at the bound.
    with db.engine.begin() as conn:
        conn.execute(t.inventories.update().values(allocation_ratio=2.0**64))
    for path in (
        "/allocation_candidates?resources=VCPU:1",
        "/resource_providers?resources=VCPU:1",
        "/resource_providers/%s/inventories" % RP,
    ):
        r = client.get(path)
        assert r.status_code == 200, (path, r.text)
    r = client.get("/allocation_candidates?resources=VCPU:1")
    summary = r.json()["provider_summaries"][RP]["resources"]["VCPU"]
    assert summary["capacity"] == 2**53


@pytest.mark.parametrize(
    "inventories",
    [
        {"": {}},  # empty class key
        {"x" * 300: {"total": 1, "junk": 1}},  # long odd key, extra field
        {"X" * 300: {"total": 1}},  # 300-character class name
        {"VCPU": {"total": 1, "junk": 1}},  # extra field
        {"vcpu": {"total": 1, "junk": 1}},  # extra field, odd key
        {"a": 5},  # record not an object
        {"\ud7ff\u0001": {}},  # odd unicode, empty record
    ],
)
def test_reshaper_refuses_bad_inventories(client, db, hostile_world, inventories):
    body = {
        "inventories": {RP: {"resource_provider_generation": 1, "inventories": inventories}},
        "allocations": {},
    }
    r = client.post("/reshaper", json=body, headers=SERVICE)
    assert_clean_4xx(r)
    assert r.status_code == 400
    assert snapshot(db) == hostile_world


@pytest.mark.parametrize("segment", ["%F0%9F%98%80", "%ff%fe", "%E2%80%AE"])
def test_non_latin1_path_segments(client, segment):
    # httpx's in-process transport (and so berth.direct) hands the app
    # decoded text as PATH_INFO; a character beyond U+00FF was a 500.
    for path in (
        "/resource_classes/",
        "/traits/",
        "/allocations/",
        "/resource_providers/%s/inventories/" % RP,
    ):
        r = client.get(path + segment)
        # GET /allocations/{anything} is an empty 200, as upstream.
        if r.status_code != 200:
            assert_clean_4xx(r)


def test_negative_zero_ratio_reads_back_the_same_everywhere(client, hostile_world):
    import math

    r = client.put(
        "/resource_providers/%s/inventories/VCPU" % RP,
        content=b'{"resource_provider_generation": 1, "total": 8, "allocation_ratio": -0.0}',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 200, r.text
    for body in (r.json(), client.get("/resource_providers/%s/inventories/VCPU" % RP).json()):
        assert math.copysign(1, body["allocation_ratio"]) == 1.0
