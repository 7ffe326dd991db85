"""Real Keystone tokens: which are accepted, which refused, and how.

Every refusal is a Placement-format error with the request id, and a
refused write changes nothing.
"""

from __future__ import annotations

import time

import pytest

from support import keystone as harness
from tests.keystone.conftest import client


def _refused(r, status=401):
    assert r.status_code == status, r.text
    assert r.headers["content-type"] == "application/json"
    (error,) = r.json()["errors"]
    assert error["status"] == status
    assert error["request_id"] == r.headers["x-openstack-request-id"]
    return error


def _create_provider(c, name="rp"):
    return c.post("/resource_providers", json={"name": name})


def test_real_tokens_are_validated_and_scoped(keystone_app, tokens, db):
    app = keystone_app()
    with client(app, tokens["admin"]) as c:
        assert _create_provider(c).status_code == 200
        assert [p["name"] for p in c.get("/resource_providers").json()["resource_providers"]] == [
            "rp"
        ]
    with client(app, tokens["nova"]) as c:
        assert c.get("/resource_providers").status_code == 200


@pytest.mark.parametrize("token", [None, "", "not-a-token", "gAAAAABfake"])
def test_missing_or_bogus_token_is_401(keystone_app, keystone, token, sqlite_db):
    app = keystone_app(db=sqlite_db)
    with client(app, token) as c:
        r = _create_provider(c)
        assert c.get("/").status_code == 200
    _refused(r)
    assert r.headers["www-authenticate"] == 'Keystone uri="%s"' % keystone.url
    with client(app, keystone.admin_token()) as c:
        assert c.get("/resource_providers").json()["resource_providers"] == []


def test_revoked_token_is_401(keystone_app, keystone, sqlite_db):
    app = keystone_app(db=sqlite_db)
    token = keystone.token("nova", project="service")
    with client(app, token) as c:
        assert c.get("/resource_providers").status_code == 200
        keystone.revoke(token)
        # keystonemiddleware keeps validated tokens for token_cache_time
        # (300 s); a fresh app (a fresh cache) asks Keystone again.
    with client(keystone_app(db=sqlite_db), token) as c:
        _refused(_create_provider(c))


def test_expired_token_is_401(keystone_app, keystone, tmp_path, sqlite_db):
    # A Keystone on the same keys that issues one-second tokens: its token
    # is genuine for the session's Keystone, then expires.
    short = harness.Keystone.create(tmp_path / "ks", share_with=keystone, expiration=1)
    try:
        token = short.token("nova", project="service")
    finally:
        short.stop()
    time.sleep(1.5)
    # Keystone itself vouches that it issued the token and that it expired.
    admin = keystone.admin_token()
    r = keystone.http.get(
        keystone.url + "/v3/auth/tokens", headers={"x-auth-token": admin, "x-subject-token": token}
    )
    assert r.status_code == 404
    r = keystone.http.get(
        keystone.url + "/v3/auth/tokens?allow_expired=1",
        headers={"x-auth-token": admin, "x-subject-token": token},
    )
    assert r.status_code == 200
    with client(keystone_app(db=sqlite_db), token) as c:
        _refused(_create_provider(c))


def test_token_from_unknown_issuer_is_401(keystone_app, keystone, other_keystone, sqlite_db):
    # Same user, same project, but signed with keys this Keystone never had.
    token = other_keystone.token("nova", project="service")
    assert (
        other_keystone.http.get(
            other_keystone.url + "/v3/auth/tokens",
            headers={"x-auth-token": token, "x-subject-token": token},
        ).status_code
        == 200
    )
    with client(keystone_app(db=sqlite_db), token) as c:
        _refused(_create_provider(c))


def test_token_for_another_project_is_403(keystone_app, keystone, tokens, sqlite_db):
    # alice reads tenant-a's usages, not tenant-b's.
    app = keystone_app(mode="secure", db=sqlite_db)
    own, other = keystone.ids["project:tenant-a"], keystone.ids["project:tenant-b"]
    with client(app, tokens["alice"]) as c:
        assert c.get("/usages?project_id=" + own).status_code == 200
        error = _refused(c.get("/usages?project_id=" + other), 403)
    assert "placement:usages" in error["detail"]
