"""``GET /openapi.json`` needs no token, and real answers fit the
response schemas the document gives."""

from __future__ import annotations

import uuid

import httpx
import jsonschema
import pytest

from berth.api.openapi_document import document
from berth.api.routes import API
from berth.api.schemas import responses

RP = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
CONSUMER = "1b2c3d4e-5f6a-4b7c-9d8e-0f1a2b3c4d5e"
SERVICE = {"x-roles": "admin,service"}


def test_served_without_a_token(app):
    with httpx.Client(
        transport=httpx.WSGITransport(app=app), base_url="http://placement.test"
    ) as anon:
        r = anon.get("/openapi.json")
        assert r.status_code == 200, r.text
        assert r.headers["content-type"] == "application/json"
        assert r.json() == document(API)
        assert r.headers["x-openstack-request-id"].startswith("req-")
        # Everything else still needs one.
        assert anon.get("/resource_providers").status_code == 401
        assert anon.get("/openapi.json/x").status_code == 401


def _schema(doc, path, method, status):
    reply = doc["paths"][path][method]["responses"][str(status)]
    if "$ref" in reply:
        return responses.ERROR
    return reply.get("content", {}).get("application/json", {}).get("schema")


@pytest.mark.parametrize("version", ["1.0", "1.14", "1.29", "latest"])
def test_answers_fit_the_document(client, version):
    doc = document(API)
    c = client.at(version)
    setup = [
        ("post", "/resource_providers", {"name": "cn1", "uuid": RP}),
        (
            "put",
            "/resource_providers/%s/inventories" % RP,
            {
                "resource_provider_generation": 0,
                "inventories": {"VCPU": {"total": 8, "allocation_ratio": 2.0}},
            },
        ),
        (
            "put",
            "/allocations/%s" % CONSUMER,
            {
                "allocations": {RP: {"resources": {"VCPU": 2}}},
                "project_id": "p",
                "user_id": "u",
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            },
        ),
    ]
    for method, path, body in setup:
        client.request(method.upper(), path, json=body)
    calls = [
        ("/", "/"),
        ("/resource_providers", "/resource_providers"),
        ("/resource_providers/{uuid}", "/resource_providers/%s" % RP),
        ("/resource_providers/{uuid}/inventories", "/resource_providers/%s/inventories" % RP),
        (
            "/resource_providers/{uuid}/inventories/{resource_class}",
            "/resource_providers/%s/inventories/VCPU" % RP,
        ),
        ("/resource_providers/{uuid}/usages", "/resource_providers/%s/usages" % RP),
        ("/resource_providers/{uuid}/aggregates", "/resource_providers/%s/aggregates" % RP),
        ("/resource_providers/{uuid}/traits", "/resource_providers/%s/traits" % RP),
        ("/resource_providers/{uuid}/allocations", "/resource_providers/%s/allocations" % RP),
        ("/allocations/{consumer_uuid}", "/allocations/%s" % CONSUMER),
        ("/allocations/{consumer_uuid}", "/allocations/%s" % uuid.uuid4()),
        ("/allocation_candidates", "/allocation_candidates?resources=VCPU:1"),
        ("/resource_classes", "/resource_classes"),
        ("/resource_classes/{name}", "/resource_classes/VCPU"),
        ("/traits", "/traits"),
        ("/usages", "/usages?project_id=p"),
        ("/resource_providers/{uuid}", "/resource_providers/%s" % uuid.uuid4()),
    ]
    seen = 0
    for template, url in calls:
        r = c.get(url)
        schema = _schema(doc, template, "get", r.status_code)
        assert schema is not None, (url, r.status_code)
        jsonschema.validate(r.json(), schema)
        if r.status_code == 200:  # the header the document lists
            assert "Berth-Position" in doc["paths"][template]["get"]["responses"]["200"]["headers"]
            jsonschema.validate(
                r.headers["berth-position"],
                doc["components"]["headers"]["Berth-Position"]["schema"],
            )
        seen += r.status_code == 200
    assert seen >= 5
