"""Authentication strategies, CORS and the request log line.

Covers the middleware ``berth.api.app`` stacks and ``berth.api.auth``."""

from __future__ import annotations

import logging

from berth.api.app import create_app
from tests.conftest import Client, make_conf


def test_keystone_strategy_rejects_missing_token_but_serves_root(db):
    conf = make_conf()
    conf.set_override("auth_strategy", "keystone", group="api")
    conf.set_override(
        "www_authenticate_uri", "http://keystone.test:5000", group="keystone_authtoken"
    )
    app = create_app(conf, db)
    with Client(app) as c:
        c.headers.pop("x-auth-token")
        assert c.get("/").status_code == 200
        r = c.get("/resource_providers")
    assert r.status_code == 401
    assert "keystone.test" in r.headers["www-authenticate"]
    # keystonemiddleware's own answer, in the Placement error format.
    assert r.headers["content-type"] == "application/json"
    (error,) = r.json()["errors"]
    assert error["status"] == 401
    assert error["request_id"] == r.headers["x-openstack-request-id"]


def test_noauth_roles_and_project(client):
    # A non-admin token is authenticated but not authorized.
    r = client.get("/resource_providers", headers={"x-auth-token": "user"})
    assert r.status_code == 403
    assert "placement:resource_providers:list" in r.json()["errors"][0]["detail"]
    r = client.get("/resource_providers", headers={"x-auth-token": "user", "x-roles": "service"})
    assert r.status_code == 200


def test_cors_preflight(db):
    conf = make_conf(
        cors__allowed_origin=["http://ok.example"], cors__allow_headers=["openstack-api-version"]
    )
    with Client(create_app(conf, db)) as c:
        r = c.request(
            "OPTIONS",
            "/",
            headers={"origin": "http://ok.example", "access-control-request-method": "GET"},
        )
        assert r.status_code == 200
        assert r.headers["access-control-allow-origin"] == "http://ok.example"
        r = c.get("/", headers={"origin": "http://bad.example"})
        assert "access-control-allow-origin" not in r.headers


def test_one_log_line_per_request(client, caplog):
    with caplog.at_level(logging.INFO, logger="berth.request"):
        client.get("/resource_providers?name=x")
    lines = [r.getMessage() for r in caplog.records if r.name == "berth.request"]
    assert len(lines) == 1
    line = lines[0]
    assert '"GET /resource_providers?name=x"' in line
    assert "status: 200" in line and "microversion: 1.39" in line
    assert "len: " in line and "time: " in line


def _forwarded_request(app, caplog, headers):
    """PUT a custom trait through ``app`` with ``headers``: the Location
    header and the request-log line."""
    with caplog.at_level(logging.INFO, logger="berth.request"), Client(app) as c:
        r = c.put("/traits/CUSTOM_FORWARDED", headers=headers)
    assert r.status_code in (201, 204), r.text
    (line,) = [rec.getMessage() for rec in caplog.records if rec.name == "berth.request"]
    return r.headers["location"], line


_PROXY_HEADERS = {
    "x-forwarded-for": "203.0.113.7",
    "x-forwarded-proto": "https",
    "x-forwarded-host": "placement.example.org",
}


def test_proxy_headers_parsed_only_when_enabled(db, caplog):
    """Behind HAProxy: [oslo_middleware] enable_proxy_headers_parsing makes
    the log line name the client and absolute URLs use the scheme and
    host the client used; off (the default), the headers are ignored."""
    app = create_app(make_conf(oslo_middleware__enable_proxy_headers_parsing=True), db)
    assert app.state is not None  # the serving layer still finds it
    location, line = _forwarded_request(app, caplog, _PROXY_HEADERS)
    assert location == "https://placement.example.org/traits/CUSTOM_FORWARDED"
    assert line.startswith('203.0.113.7 "PUT /traits/CUSTOM_FORWARDED"')
    caplog.clear()
    # RFC 7239's header, as oslo.middleware reads it.
    location, line = _forwarded_request(
        app, caplog, {"forwarded": "for=198.51.100.2;proto=https;host=p.example"}
    )
    assert location == "https://p.example/traits/CUSTOM_FORWARDED"
    assert line.startswith('198.51.100.2 "PUT')
    caplog.clear()
    # Refused before the application runs: logged with the client too.
    with caplog.at_level(logging.INFO, logger="berth.request"), Client(app) as c:
        r = c.get("/resource_providers?" + "x" * 9000, headers=_PROXY_HEADERS)
    assert r.status_code == 414
    assert [rec.getMessage() for rec in caplog.records if rec.name == "berth.request"][
        0
    ].startswith("203.0.113.7 ")
    caplog.clear()
    location, line = _forwarded_request(create_app(make_conf(), db), caplog, _PROXY_HEADERS)
    assert location == "http://placement.test/traits/CUSTOM_FORWARDED"
    assert "203.0.113.7" not in line
