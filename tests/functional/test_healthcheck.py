"""``/healthcheck``: oslo.middleware's answer, our database backend, and
details only for callers policy allows."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from berth.api.app import create_app
from berth.db.engine import Database, create_engine
from tests.conftest import Client, make_conf

JSON = {"accept": "application/json"}


def _anonymous(app: Any) -> Client:
    client = Client(app, version=None)
    del client.headers["x-auth-token"]
    del client.headers["accept"]
    return client


def test_the_database_backend_is_an_entry_point() -> None:
    found = entry_points(group="oslo.middleware.healthcheck")
    names = {ep.name: ep.value for ep in found}
    assert names["berth_database"] == "berth.api.healthcheck_middleware:DatabaseHealthcheck"
    assert make_conf().healthcheck.backends == ["berth_database"]


def test_anonymous_callers_get_the_plain_answer(app: Any) -> None:
    with _anonymous(app) as client:
        text = client.get("/healthcheck")
        assert (text.status_code, text.text) == (200, "OK")
        assert text.headers["content-type"].startswith("text/plain")
        body = client.get("/healthcheck", headers=JSON)
        assert body.status_code == 200
        assert body.json() == {"detailed": False, "reasons": ["OK"]}
        head = client.head("/healthcheck")
        assert head.status_code == 204 and head.content == b""
        # Other methods and URLs still need a token.
        assert client.post("/healthcheck").status_code == 401
        assert client.get("/resource_providers").status_code == 401


def test_details_follow_policy_not_the_detailed_switch(db: Database) -> None:
    app = create_app(make_conf(healthcheck__detailed=True), db)
    with _anonymous(app) as client:
        assert client.get("/healthcheck", headers=JSON).json() == {
            "detailed": False,
            "reasons": ["OK"],
        }
    with Client(app, token="someone:project") as client:
        assert client.get("/healthcheck", headers=JSON).json() == {
            "detailed": False,
            "reasons": ["OK"],
        }
    with Client(app) as admin:
        resp = admin.get("/healthcheck", headers=JSON)
        assert resp.status_code == 200
        body = resp.json()
        assert body["detailed"] is True and "threads" in body
        [reason] = body["reasons"]
        assert reason["reason"] == "OK"
        assert reason["details"].startswith(db.backend + " answered in ")
        assert "candidate cache not loaded" in reason["details"]
        assert admin.get("/allocation_candidates?resources=VCPU:1").status_code == 200
        reason = admin.get("/healthcheck", headers=JSON).json()["reasons"][0]
        assert "candidate cache 0 changes behind" in reason["details"]
        assert admin.head("/healthcheck").status_code == 204


def test_a_lost_database_is_503_and_only_admins_see_why(tmp_path: Path) -> None:
    engine = create_engine("sqlite:///%s" % (tmp_path / "gone" / "p.sqlite"))
    app = create_app(make_conf(), Database(engine))
    with _anonymous(app) as client:
        resp = client.get("/healthcheck", headers=JSON)
        assert resp.status_code == 503
        assert resp.json() == {"detailed": False, "reasons": ["database unavailable"]}
        assert "unable to open" not in resp.text
        assert client.head("/healthcheck").status_code == 503
    with Client(app) as admin:
        resp = admin.get("/healthcheck", headers=JSON)
        assert resp.status_code == 503
        [reason] = resp.json()["reasons"]
        # The database layer's Unavailable, with the driver's words.
        assert reason["details"].startswith("Unavailable: ")
        assert "unable to open database file" in reason["details"]


def test_allowed_source_ranges_turn_others_away(db: Database) -> None:
    conf = make_conf(healthcheck__allowed_source_ranges=["10.0.0.0/8"])
    with _anonymous(create_app(conf, db)) as client:
        # Not answered by the healthcheck: on to authentication.
        assert client.get("/healthcheck").status_code == 401
    with Client(create_app(conf, db)) as admin:
        assert admin.get("/healthcheck").status_code == 404


def test_head_root_is_405_as_upstream(client: Client) -> None:
    """Upstream routes GET / only; HEAD / answers 405 there too. Probes
    use HEAD /healthcheck."""
    resp = client.head("/")
    assert resp.status_code == 405
    assert resp.headers["allow"] == "GET"
