"""Every endpoint and method, every persona, both policy modes, with real
Keystone tokens.

Expectations are our reading of upstream Placement's policy defaults
(``placement/policies/*.py`` and its policy reference): nearly every API
is ``admin_or_service_api`` (``role:admin or role:service``);
``POST /reshaper`` is ``service_api`` (``role:service``); ``GET /usages``
is ``admin_or_project_reader_or_service_api`` (admin, the service role, or
a reader of the project asked about). Each rule is project-scoped and, in
the legacy mode, also allows its deprecated ``role:admin``. So:

* legacy (``enforce_new_defaults = False``, no scope checks): any token
  holding ``admin`` passes every rule, whatever its scope; the service
  role passes every rule;
* secure RBAC (``enforce_new_defaults`` and ``enforce_scope``): a
  system-scoped token passes nothing; admin may not reshape.

Members and readers of a project may only read their own project's
``/usages``, and the change feed of their own project's consumers
(``GET /berth/changes?project=...``, the same rule kind). Keystone's
implied roles give every member the reader role.

A refused request is a Placement-format 403 (401 without a token) and
changes nothing in the database.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import sqlalchemy as sa

from berth.api.app import create_app
from berth.api.routes import ROUTES
from berth.db import tables as t
from tests.conftest import Client, make_conf
from tests.keystone.conftest import client

PERSONAS = ["admin", "sysadmin", "nova", "alice", "abby", "bob", "bert", "sysreader", "norole"]

#: Who passes each kind of rule, per mode. alice and abby are tenant-a's
#: member and reader, bob and bert tenant-b's; /usages asks about tenant-a.
ALLOWED = {
    ("legacy", "admin_or_service"): {"admin", "sysadmin", "nova"},
    ("secure", "admin_or_service"): {"admin", "nova"},
    ("legacy", "service"): {"admin", "sysadmin", "nova"},
    ("secure", "service"): {"nova"},
    ("legacy", "usages"): {"admin", "sysadmin", "nova", "alice", "abby"},
    ("secure", "usages"): {"admin", "nova", "alice", "abby"},
    ("legacy", "public"): set(PERSONAS),
    ("secure", "public"): set(PERSONAS),
    # Berth's own rule:admin_api endpoints (metrics, explain, fit).
    ("legacy", "admin"): {"admin", "sysadmin"},
    ("secure", "admin"): {"admin"},
}

RP = "/resource_providers/{uuid}"
AS = "admin_or_service"
# (method, route, rule kind, body): the route is the routes table's key.
MATRIX: list[tuple[str, str, str, Any]] = [
    ("GET", "/", "public", None),
    ("GET", "/resource_providers", AS, None),
    ("POST", "/resource_providers", AS, {"name": "made"}),
    ("GET", RP, AS, None),
    ("PUT", RP, AS, {"name": "renamed"}),
    ("DELETE", RP, AS, None),
    ("GET", RP + "/inventories", AS, None),
    ("POST", RP + "/inventories", AS, {"resource_class": "DISK_GB", "total": 10}),
    (
        "PUT",
        RP + "/inventories",
        AS,
        {"resource_provider_generation": 1, "inventories": {"VCPU": {"total": 8}}},
    ),
    ("DELETE", RP + "/inventories", AS, None),
    ("GET", RP + "/inventories/{resource_class}", AS, None),
    (
        "PUT",
        RP + "/inventories/{resource_class}",
        AS,
        {"resource_provider_generation": 1, "total": 16},
    ),
    ("DELETE", RP + "/inventories/{resource_class}", AS, None),
    ("GET", RP + "/usages", AS, None),
    ("GET", RP + "/aggregates", AS, None),
    (
        "PUT",
        RP + "/aggregates",
        AS,
        {"resource_provider_generation": 1, "aggregates": [str(uuid.uuid4())]},
    ),
    ("GET", RP + "/allocations", AS, None),
    ("GET", RP + "/traits", AS, None),
    ("PUT", RP + "/traits", AS, {"resource_provider_generation": 1, "traits": ["CUSTOM_T"]}),
    ("DELETE", RP + "/traits", AS, None),
    ("GET", "/resource_classes", AS, None),
    ("POST", "/resource_classes", AS, {"name": "CUSTOM_NEW"}),
    ("GET", "/resource_classes/{name}", AS, None),
    ("PUT", "/resource_classes/{name}", AS, None),
    ("DELETE", "/resource_classes/{name}", AS, None),
    ("POST", "/allocations", AS, {}),
    ("GET", "/allocations/{consumer_uuid}", AS, None),
    ("PUT", "/allocations/{consumer_uuid}", AS, "allocation"),
    ("DELETE", "/allocations/{consumer_uuid}", AS, None),
    ("GET", "/allocation_candidates", AS, None),
    ("GET", "/traits", AS, None),
    ("GET", "/traits/{name}", AS, None),
    ("PUT", "/traits/{name}", AS, None),
    ("DELETE", "/traits/{name}", AS, None),
    ("GET", "/usages", "usages", None),
    ("POST", "/reshaper", "service", "reshape"),
    # Berth's own endpoints.
    ("GET", "/openapi.json", "public", None),
    ("GET", "/healthcheck", "public", None),
    ("HEAD", "/healthcheck", "public", None),
    ("GET", "/metrics", "admin", None),
    ("GET", "/berth/explain/allocation_candidates", "admin", None),
    ("GET", "/berth/fit", "admin", None),
    # The candidates in an order chosen per request: upstream's rule.
    ("GET", "/berth/allocation_candidates", AS, None),
    ("GET", "/berth/changes", "usages", None),
    ("GET", "/dashboard", "admin", None),
    ("GET", "/dashboard/providers", "admin", None),
    ("GET", "/dashboard/consumers", "admin", None),
    ("GET", "/dashboard/explain", "admin", None),
    ("GET", "/dashboard/fit", "admin", None),
    ("GET", "/dashboard/first", "admin", None),
    ("GET", "/dashboard/changes", "usages", None),
    ("GET", "/dashboard/seq", "admin", None),
    ("GET", "/dashboard/static/{name}", "public", None),
]


def test_matrix_covers_every_route():
    routed = {(m, path) for path, methods in ROUTES.items() for m in methods}
    assert {(m, path) for m, path, _, _ in MATRIX} == routed


class World:
    """A provider with inventory, a custom class and trait, and one
    consumer's allocation, made without Keystone (noauth2)."""

    def __init__(self, db: Any, project: str) -> None:
        self.rp = str(uuid.uuid4())
        self.consumer = str(uuid.uuid4())
        self.project = project
        with Client(create_app(make_conf(), db)) as c:
            ok = [
                c.post("/resource_providers", json={"name": "rp", "uuid": self.rp}),
                c.put(
                    "/resource_providers/%s/inventories" % self.rp,
                    json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}},
                ),
                c.put("/resource_classes/CUSTOM_X"),
                c.put("/traits/CUSTOM_T"),
                c.put("/allocations/%s" % self.consumer, json=self.allocation(None)),
            ]
        assert all(r.status_code < 300 for r in ok), [r.text for r in ok]

    def allocation(self, generation: int | None) -> dict[str, Any]:
        return {
            "allocations": {self.rp: {"resources": {"VCPU": 1}}},
            "project_id": self.project,
            "user_id": "u",
            "consumer_generation": generation,
            "consumer_type": "INSTANCE",
        }

    def url(self, route: str) -> str:
        name = (
            "CUSTOM_T"
            if "/traits" in route
            else "dashboard.css"
            if "/static/" in route
            else "CUSTOM_X"
        )
        url = route.format(
            uuid=self.rp, resource_class="VCPU", name=name, consumer_uuid=self.consumer
        )
        if route == "/usages":
            url += "?project_id=" + self.project
        if route in ("/berth/changes", "/dashboard/changes"):
            # a project reader: its own only
            url += "?after=0&project=" + self.project
        if route in (
            "/allocation_candidates",
            "/berth/fit",
            "/berth/explain/allocation_candidates",
            "/berth/allocation_candidates",
        ):
            url += "?resources=VCPU:1"
        if route in ("/dashboard/explain", "/dashboard/fit", "/dashboard/first"):
            url += "?q=resources%3DVCPU%3A1"
        return url

    def body(self, spec: Any) -> Any:
        if spec == "allocation":
            return self.allocation(1)
        if spec == "reshape":
            return {
                "inventories": {
                    self.rp: {
                        "resource_provider_generation": 1,
                        "inventories": {"VCPU": {"total": 8}},
                    }
                },
                "allocations": {self.consumer: self.allocation(1)},
            }
        return spec


def snapshot(db: Any) -> dict[str, list[tuple[Any, ...]]]:
    with db.engine.connect() as conn:
        return {
            table.name: sorted(map(tuple, conn.execute(sa.select(table)).all()), key=repr)
            for table in t.metadata.sorted_tables
        }


@pytest.mark.parametrize("mode", ["legacy", "secure"])
@pytest.mark.parametrize(
    "method,route,kind,spec", MATRIX, ids=["%s %s" % (m, r) for m, r, _, _ in MATRIX]
)
def test_policy_matrix(keystone, keystone_app, tokens, db, mode, method, route, kind, spec):
    world = World(db, keystone.ids["project:tenant-a"])
    app = keystone_app(mode=mode)
    url, body = world.url(route), world.body(spec)
    allowed = ALLOWED[(mode, kind)]
    before = snapshot(db)
    refusals: dict[str, int] = {}
    callers = [None] + [p for p in PERSONAS if p not in allowed]
    for persona in callers:
        with client(app, tokens[persona] if persona else None) as c:
            r = c.request(method, url, json=body)
        if kind == "public":
            assert r.status_code == (204 if method == "HEAD" else 200)
            continue
        refusals[persona or "no token"] = r.status_code
        error = r.json()["errors"][0]
        assert error["status"] == r.status_code
        assert error["request_id"] == r.headers["x-openstack-request-id"]
    want = {p or "no token": 403 for p in callers}
    if kind != "public":
        want["no token"] = 401
        assert refusals == want
    assert snapshot(db) == before
    # Allowed callers go last: their writes may change the world.
    answers = {}
    for persona in sorted(allowed):
        with client(app, tokens[persona]) as c:
            answers[persona] = c.request(method, url, json=body).status_code
    assert all(s not in (401, 403) and s < 500 for s in answers.values()), answers
