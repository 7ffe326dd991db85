"""The OpenAPI document covers the routes table, is valid OpenAPI 3.1, and
takes its request schemas from the handlers' own validators."""

from __future__ import annotations

import pytest
from openapi_spec_validator import validate

from berth.api.openapi_document import document
from berth.api.openapi_document.operations import OPERATIONS
from berth.api.routes import API, ROUTES, SERVED_ELSEWHERE, WATCH
from berth.api.schemas import allocation, inventory, reshaper


def test_document_is_valid_openapi_3_1(doc):
    assert doc["openapi"].startswith("3.1")
    validate(doc)


def test_every_route_and_method_has_an_operation_with_a_summary(doc):
    for template, methods in API.items():
        for method in methods:
            op = doc["paths"].get(template, {}).get(method.lower())
            assert op is not None, "no operation for %s %s" % (method, template)
            assert op["summary"].strip(), "%s %s has no summary" % (method, template)


def test_no_operation_without_a_route():
    routed = {(path, method) for path, methods in API.items() for method in methods}
    assert set(OPERATIONS) - routed == set()


def test_a_route_missing_from_the_table_is_named():
    with pytest.raises(KeyError, match="/berth/nowhere"):
        document({"/berth/nowhere": {"GET": lambda *a: None}})


def test_microversion_ranges_follow_the_gates(doc):
    assert doc["paths"]["/reshaper"]["post"]["x-openstack-microversion"] == {
        "min": "1.30",
        "max": "1.39",
    }
    inv = doc["paths"]["/resource_providers/{uuid}/inventories"]
    assert inv["delete"]["x-openstack-microversion"]["min"] == "1.5"
    assert inv["get"]["x-openstack-microversion"]["min"] == "1.0"


def test_request_schemas_are_the_handlers_own(doc):
    ops = OPERATIONS
    rp_inv = "/resource_providers/{uuid}/inventories"
    assert ops[(rp_inv, "PUT")].body[0][1] is inventory.PUT_ALL_V
    assert ops[("/allocations/{consumer_uuid}", "PUT")].body is (allocation.PUT_SCHEMAS)
    assert ops[("/reshaper", "POST")].body is reshaper.SCHEMAS
    body = doc["paths"][rp_inv]["put"]["requestBody"]["content"]["application/json"]["schema"]
    assert body == inventory.PUT_ALL_V.schema
    # A versioned body lists one schema per range, newest last.
    variants = doc["paths"]["/allocations/{consumer_uuid}"]["put"]["requestBody"]["content"][
        "application/json"
    ]["schema"]["anyOf"]
    assert [v["title"] for v in variants][-1] == "microversions 1.38 - 1.39"
    assert {k: v for k, v in variants[-1].items() if k != "title"} == (
        allocation.PUT_SCHEMAS[-1][1].schema
    )


def test_errors_headers_and_security_are_described(doc):
    comp = doc["components"]
    assert comp["schemas"]["Error"]["properties"]["errors"]["items"]["required"] == [
        "detail",
        "status",
        "title",
    ]
    assert {
        "OpenStack-API-Version",
        "x-openstack-request-id",
        "last-modified",
        "cache-control",
    } <= set(comp["headers"])
    get = doc["paths"]["/resource_providers"]["get"]
    assert "last-modified" in get["responses"]["200"]["headers"]
    assert get["responses"]["400"] == {"$ref": "#/components/responses/E400"}
    assert doc["paths"]["/"]["get"]["security"] == []
    assert doc["paths"]["/openapi.json"]["get"]["security"] == []
    assert doc["security"] == [{"token": []}]


def test_every_read_answer_lists_the_berth_position_header(doc):
    header = doc["components"]["headers"]["Berth-Position"]
    assert "change sequence" in header["description"]
    ref = {"$ref": "#/components/headers/Berth-Position"}
    reads = writes = 0
    for path, item in doc["paths"].items():
        for method, op in item.items():
            for status, reply in op["responses"].items():
                if not status.startswith("2") or "x-berth-served-by" in op:
                    continue
                listed = reply["headers"].get("Berth-Position")
                if method in ("get", "head"):
                    assert listed == ref, (method, path, status)
                    reads += 1
                else:  # writes carry none (docs/change-feed.md)
                    assert listed is None, (method, path, status)
                    writes += 1
    assert reads > 20 and writes > 10
    assert "Berth-Position" in doc["paths"]["/berth/changes"]["get"]["responses"]["200"]["headers"]


def test_keystone_and_noauth_both_let_the_document_through():
    from berth.api import auth

    assert auth._is_public({"PATH_INFO": "/openapi.json"})
    assert not auth._is_public({"PATH_INFO": "/openapi.json/x"})
    assert not auth._is_public({"PATH_INFO": "/resource_providers"})


def test_the_ordered_candidates_form_documents_its_parameters(doc):
    """GET /berth/allocation_candidates takes the upstream query and the
    order parameters (the handler's own schema for them); the upstream
    URL documents none of them."""
    from berth.api.schemas import allocation_candidate as cand

    def names(path):
        return {p["name"] for p in doc["paths"][path]["get"]["parameters"] if "name" in p}

    ordered, upstream = (names("/berth/allocation_candidates"), names("/allocation_candidates"))
    assert ordered == upstream | {"order", "weights", "prefer"}
    assert not {"order", "weights", "prefer"} & upstream
    spec = {
        p["name"]: p
        for p in doc["paths"]["/berth/allocation_candidates"]["get"]["parameters"]
        if "name" in p
    }
    assert spec["order"]["schema"]["enum"] == ["uuid", "random", "spread", "pack"]
    assert spec["weights"]["schema"] is not None
    assert OPERATIONS[("/berth/allocation_candidates", "GET")].query is (cand.ORDERED_SCHEMAS)
    assert cand.ORDER_V.schema["properties"] == cand.ORDER_PROPERTIES


def test_the_watch_is_documented_as_served_by_the_watch_server(doc):
    """The watch form is in the document, not in the app's table, and
    says who serves it; the watch server serves the declared path."""
    from berth.serve.watch import feed

    assert set(SERVED_ELSEWHERE) == {WATCH} and WATCH not in ROUTES
    assert feed.PATH == WATCH
    op = doc["paths"][WATCH]["get"]
    assert op["x-berth-served-by"] == "berth.serve.watch"
    assert {"application/x-ndjson", "text/event-stream"} == set(op["responses"]["200"]["content"])
    params = {p["name"]: p for p in op["parameters"] if "name" in p}
    assert params["after"]["required"] is True
    assert params["format"]["schema"]["enum"] == ["jsonl", "sse"]
    # No microversion, no Berth-Position: only the request id.
    assert list(op["responses"]["200"]["headers"]) == ["x-openstack-request-id"]
    assert "410" in op["responses"]


def _required_in_every_range(query):
    """The query keys every microversion's schema of ``query`` requires."""
    sets = [set(v.schema.get("required", ())) for _, v in query]
    return set.intersection(*sets) if sets else set()


def test_query_parameters_are_required_as_the_request_schemas_say(doc):
    """For every route and method, a query parameter is required in the
    document exactly when the schema the handler validates with requires
    it (in every microversion)."""
    checked = required = 0
    for template, methods in API.items():
        for method in methods:
            wanted = _required_in_every_range(OPERATIONS[(template, method)].query)
            params = [
                p
                for p in doc["paths"][template][method.lower()]["parameters"]
                if p.get("in") == "query"
            ]
            for p in params:
                assert p["required"] is (p["name"] in wanted), (method, template, p["name"])
                checked += 1
                required += p["required"]
            assert wanted <= {p["name"] for p in params}, (method, template)
    assert checked > 50 and required >= 4


def test_the_feed_requires_after_and_usages_a_project(doc):
    def required(path):
        return {
            p["name"]
            for p in doc["paths"][path]["get"]["parameters"]
            if p.get("required") and p.get("in") == "query"
        }

    assert required("/berth/changes") == {"after"}
    assert required("/dashboard/changes") == {"after"}
    assert required("/usages") == {"project_id"}
    assert required("/resource_providers") == set()


def test_berth_only_parameters_are_described_in_words(doc):
    """A Berth-only parameter says what it is, not the first
    microversion (which says nothing on a Berth-only route)."""
    for path, item in doc["paths"].items():
        for method, op in item.items():
            for p in op["parameters"]:
                if p.get("in") != "query":
                    continue
                text = p["description"]
                if path.startswith(("/berth/changes", "/dashboard")):
                    assert not text.startswith("From microversion"), (method, path, p["name"])
                if p["name"] in ("order", "weights", "prefer"):
                    assert text.startswith("Berth only"), (path, text)
    after = {
        p["name"]: p for p in doc["paths"]["/berth/changes"]["get"]["parameters"] if "name" in p
    }["after"]
    assert "Berth-Position" in after["description"]
