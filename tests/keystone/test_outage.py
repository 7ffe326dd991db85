"""Keystone down: a clean Placement-format 503, then recovery."""

from __future__ import annotations

from tests.keystone.conftest import client


def test_keystone_outage_is_a_placement_503_and_recovers(keystone_app, other_keystone, sqlite_db):
    app = keystone_app(ks=other_keystone, db=sqlite_db)
    seen = other_keystone.token("nova", project="service")
    fresh = other_keystone.token("nova", project="service")
    with client(app, seen) as c:
        assert c.get("/resource_providers").status_code == 200
    other_keystone.stop()
    try:
        with client(app, fresh) as c:
            r = c.post("/resource_providers", json={"name": "during"})
            assert c.get("/").status_code == 200
            # keystonemiddleware's own 503 page is HTML: a client stating no
            # preference gets JSON; one asking for text/html gets
            # Placement's HTML error page, as for any other error.
            c.headers.pop("accept")
            bare = c.get("/resource_providers")
            html = c.get("/resource_providers", headers={"accept": "text/html"})
    finally:
        other_keystone.start()
    assert r.status_code == 503
    assert r.headers["content-type"] == "application/json"
    (error,) = r.json()["errors"]
    assert error["status"] == 503 and error["title"] == "Service Unavailable"
    assert "Keystone" in error["detail"]
    assert error["request_id"] == r.headers["x-openstack-request-id"]
    assert bare.status_code == 503
    assert bare.json()["errors"][0]["status"] == 503
    assert html.status_code == 503 and "Keystone" in html.text
    # Back up: the same app validates the same token, with no restart, and
    # the refused write had changed nothing.
    with client(app, fresh) as c:
        r = c.get("/resource_providers")
    assert r.status_code == 200, r.text
    assert r.json()["resource_providers"] == []
