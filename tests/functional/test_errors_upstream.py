"""Refusals of bad bodies and query strings, against upstream Placement
16.0.0 (the ``upstream`` fixture): every endpoint of upstream's URL space
with a body or query schema, at each microversion where its schema
changes, answers the same status, code, title and ``detail``, character
for character.

Covers ``api/errors.py`` (WebOb's formatting: the detail on one line,
tags dropped) and ``api/util.py`` (which error is named: jsonschema's
``best_match``, as ``jsonschema.validate`` picks it, not the first one
found). A body or query refused at its root names the whole schema, so
those cases also pin every schema to upstream's.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import httpx
import pytest

RP = "5d3c2b1a-7e6f-4a8b-9c0d-1e2f3a4b5c6d"
CONSUMER = "8e7d6c5b-4a3f-4b2c-8d1e-0f9a8b7c6d5e"
RPS = "/resource_providers"
ON_RP = "%s/%s" % (RPS, RP)
ALLOCS = "/allocations/%s" % CONSUMER

#: Where Berth's schemas differ from upstream's (berth.api.schemas): a
#: refusal that names the whole schema then differs.
AMOUNTS = (
    "Berth's schema caps an allocated amount at 2**31 - 1 (the "
    "column's limit); upstream's sets no maximum"
)
INVENTORIES = (
    "Berth's schema also checks the record under a key that is "
    "not a class name; upstream's leaves it unchecked"
)
QUERY_UUIDS = (
    "upstream checks uuids in a query with jsonschema's own "
    "format checker, which wants the dashes; Berth with the "
    "one upstream uses for bodies (any uuid spelling)"
)


class Case(NamedTuple):
    method: str
    path: str
    body: Any
    version: str
    #: why Berth's answer differs, where it does on purpose
    differs: str = ""


#: The cases by endpoint. A body of the wrong kind ([]) is refused at the
#: root, naming the whole schema.
CASES: dict[str, list[Case]] = {
    "POST /resource_providers": [
        # Both bad: upstream names uuid (the later name); the first error
        # found would be the name's.
        Case("POST", RPS, {"name": 1, "uuid": "x"}, "1.0"),
        Case("POST", RPS, [], "1.0"),
        Case("POST", RPS, [], "1.14"),
        Case("POST", RPS, {"name": "a", "uuid": "x", "parent_provider_uuid": "y"}, "1.14"),
        Case("POST", RPS, {"name": "a", "zzz": 1, "yyy": 2}, "1.20"),
        Case("POST", RPS, {}, "1.20"),
        # Tags and comment marks go, line breaks and carriage returns too.
        Case("POST", RPS, {"name": "<b>bold</b> <!-- x --> a\r\nb<br/>c" * 10}, "1.20"),
    ],
    "PUT /resource_providers/{u}": [
        Case("PUT", ON_RP, [], "1.0"),
        Case("PUT", ON_RP, [], "1.14"),
        Case("PUT", ON_RP, {"name": 1, "parent_provider_uuid": "y"}, "1.14"),
    ],
    "GET /resource_providers": [
        *[Case("GET", RPS + "?bad=1", None, v) for v in ("1.0", "1.3", "1.4", "1.14", "1.18")],
        Case("GET", RPS + "?uuid=x&in_tree=y&name=1", None, "1.18"),
        Case("GET", RPS + "?in_tree=y&uuid=x", None, "1.18"),
        Case("GET", RPS + "?uuid=" + RP.replace("-", ""), None, "1.18", QUERY_UUIDS),
        Case("GET", RPS + "?in_tree=" + RP.replace("-", ""), None, "1.18", QUERY_UUIDS),
    ],
    "PUT /resource_providers/{u}/inventories": [
        Case("PUT", ON_RP + "/inventories", [], "1.0", INVENTORIES),
        Case(
            "PUT",
            ON_RP + "/inventories",
            {
                "inventories": {"VCPU": {"total": 0, "reserved": -1}, "bad": {}},
                "resource_provider_generation": "x",
            },
            "1.0",
        ),
        Case(
            "PUT",
            ON_RP + "/inventories",
            {
                "inventories": {"VCPU": {"total": 0, "reserved": -1}},
                "resource_provider_generation": 0,
            },
            "1.0",
        ),
    ],
    "POST /resource_providers/{u}/inventories": [
        Case("POST", ON_RP + "/inventories", [], "1.0"),
        Case(
            "POST",
            ON_RP + "/inventories",
            {"resource_class": "x", "total": -1, "max_unit": 0},
            "1.0",
        ),
    ],
    "PUT /resource_providers/{u}/inventories/{rc}": [
        Case("PUT", ON_RP + "/inventories/VCPU", [], "1.0"),
        Case(
            "PUT",
            ON_RP + "/inventories/VCPU",
            {"total": -1, "max_unit": 0, "resource_provider_generation": "x"},
            "1.0",
        ),
    ],
    "PUT /resource_providers/{u}/aggregates": [
        Case("PUT", ON_RP + "/aggregates", {}, "1.1"),
        Case("PUT", ON_RP + "/aggregates", ["abc"], "1.1"),
        Case("PUT", ON_RP + "/aggregates", [], "1.19"),
        # osc-placement prints the last line: "'abc' is not a 'uuid'".
        Case(
            "PUT",
            ON_RP + "/aggregates",
            {"aggregates": ["abc"], "resource_provider_generation": 0},
            "1.19",
        ),
        Case(
            "PUT",
            ON_RP + "/aggregates",
            {"aggregates": ["abc", "def"], "resource_provider_generation": "x"},
            "1.19",
        ),
    ],
    "PUT /resource_providers/{u}/traits": [
        Case("PUT", ON_RP + "/traits", [], "1.6"),
        Case(
            "PUT",
            ON_RP + "/traits",
            {"traits": [1, "x" * 300], "resource_provider_generation": "x"},
            "1.6",
        ),
    ],
    "GET /traits": [
        Case("GET", "/traits?name=in:a&associated=maybe&zz=1", None, "1.6"),
    ],
    "PUT /traits/{name}": [
        Case("PUT", "/traits/not_custom", None, "1.6"),
    ],
    "POST /resource_classes": [
        Case("POST", "/resource_classes", [], "1.2"),
        Case("POST", "/resource_classes", {"name": "fake_class"}, "1.2"),
        Case("POST", "/resource_classes", {"name": "x", "other": 1}, "1.2"),
    ],
    "PUT /resource_classes/{name}": [
        Case("PUT", "/resource_classes/CUSTOM_A", {"name": "x"}, "1.2"),
        Case("PUT", "/resource_classes/fake_class", None, "1.7"),
    ],
    "GET /usages": [
        Case("GET", "/usages?bad=1", None, "1.9"),
        Case("GET", "/usages?bad=1", None, "1.38"),
        Case("GET", "/usages?project_id=&user_id=&consumer_type=", None, "1.38"),
    ],
    "PUT /allocations/{c}": [
        *[
            Case("PUT", ALLOCS, [], v, AMOUNTS)
            for v in ("1.0", "1.8", "1.12", "1.28", "1.34", "1.38")
        ],
        # The shallower error: the provider's unknown key, not its uuid.
        Case(
            "PUT",
            ALLOCS,
            {
                "allocations": [
                    {"resource_provider": {"uuid": "x", "z": 1}, "resources": {"VCPU": 1}}
                ]
            },
            "1.0",
        ),
        Case(
            "PUT",
            ALLOCS,
            {
                "allocations": {RP: {"resources": {"VCPU": 0, "x": 1}}},
                "project_id": 1,
                "user_id": 2,
                "consumer_generation": "x",
                "consumer_type": 3,
            },
            "1.38",
        ),
    ],
    "POST /allocations": [
        *[Case("POST", "/allocations", [], v, AMOUNTS) for v in ("1.13", "1.28", "1.34", "1.38")],
        Case(
            "POST",
            "/allocations",
            {
                CONSUMER: {
                    "allocations": {RP: {"resources": {"VCPU": 0}}},
                    "project_id": 1,
                    "user_id": 2,
                    "consumer_generation": "x",
                    "consumer_type": 3,
                }
            },
            "1.38",
        ),
    ],
    "POST /reshaper": [
        *[
            Case("POST", "/reshaper", [], v, AMOUNTS + "; " + INVENTORIES)
            for v in ("1.30", "1.34", "1.38")
        ],
        Case(
            "POST",
            "/reshaper",
            {
                "inventories": {RP: {"inventories": {}, "resource_provider_generation": "x"}},
                "allocations": {
                    CONSUMER: {
                        "allocations": {},
                        "project_id": 1,
                        "user_id": "u",
                        "consumer_generation": None,
                        "consumer_type": "A",
                    }
                },
            },
            "1.38",
        ),
    ],
    "GET /allocation_candidates": [
        *[
            Case("GET", "/allocation_candidates?resources=VCPU:1&zz=1", None, v)
            for v in ("1.10", "1.16", "1.17", "1.21", "1.25", "1.31", "1.33", "1.35", "1.36")
        ],
        Case("GET", "/allocation_candidates?resources=VCPU:1&limit=x&group_policy=x", None, "1.36"),
        Case("GET", "/allocation_candidates?resources=VCPU:1&limit=-1", None, "1.36"),
    ],
}


def _refusal(http: httpx.Client, case: Case) -> tuple[int, dict[str, Any]]:
    # Upstream's server keeps the legacy policy defaults, Berth's app the
    # new ones: with both roles each lets every request through.
    headers = {"openstack-api-version": "placement %s" % case.version, "x-roles": "admin,service"}
    if case.body is None and case.method != "GET":
        headers["content-type"] = "application/json"
    resp = http.request(case.method, case.path, json=case.body, headers=headers)
    if resp.status_code < 400:
        return resp.status_code, {"detail": resp.text}
    error = dict(resp.json()["errors"][0])
    error.pop("request_id", None)
    return resp.status_code, error


def _provider(http: httpx.Client) -> None:
    """The provider the paths name."""
    resp = http.post(RPS, json={"name": "errors-upstream", "uuid": RP})
    assert resp.status_code == 200, resp.text


@functools.cache
def _upstreams(upstream: httpx.Client) -> dict[str, list[tuple[int, dict[str, Any]]]]:
    """Upstream's refusal of each case, asked once a session: they are
    the same for each of Berth's backends."""
    _provider(upstream)
    return {
        endpoint: [_refusal(upstream, case) for case in cases] for endpoint, cases in CASES.items()
    }


def _where_they_part(got: str, expected: str) -> str:
    """The details from where they first differ (they run to thousands
    of characters)."""
    at = next(
        (i for i, (a, b) in enumerate(zip(got, expected, strict=False)) if a != b),
        min(len(got), len(expected)),
    )
    return "at %d:\n  berth:    %r\n  upstream: %r" % (
        at,
        got[max(at - 80, 0) : at + 160],
        expected[max(at - 80, 0) : at + 160],
    )


@pytest.mark.parametrize("endpoint", list(CASES))
def test_refused_in_upstreams_words(client: Any, upstream: httpx.Client, endpoint: str) -> None:
    _provider(client)
    wrong = []
    for case, expected in zip(CASES[endpoint], _upstreams(upstream)[endpoint], strict=True):
        assert expected[0] == 400, (case, expected)
        got = _refusal(client, case)
        if case.differs and got == expected:
            wrong.append(
                "%s %s @%s: now as upstream, drop the note %r"
                % (case.method, case.path, case.version, case.differs)
            )
        elif not case.differs and got != expected:
            wrong.append(
                "%s %s @%s: %s %s"
                % (
                    case.method,
                    case.path,
                    case.version,
                    got[0],
                    _where_they_part(got[1]["detail"], expected[1]["detail"])
                    if got[0] == expected[0]
                    else got[1]["detail"],
                )
            )
    assert not wrong, "\n".join(wrong)
