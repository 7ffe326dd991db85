"""PlacementDirect: the real app in-process, as a trusted service user."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from berth.direct import PlacementDirect
from tests.conftest import make_conf


def test_direct_under_keystone_config_keeps_the_callers_conf(db: Any) -> None:
    conf = make_conf(api__auth_strategy="keystone")
    with PlacementDirect(conf, db) as http:
        response = http.get("/resource_providers")
        assert response.status_code == 200, response.text
        assert response.json() == {"resource_providers": []}
    assert conf.api.auth_strategy == "keystone"


def test_direct_passes_the_service_only_reshaper_policy(db: Any) -> None:
    conf = make_conf()  # new defaults: reshape needs role:service
    with PlacementDirect(conf, db, microversion="1.30") as http:
        response = http.post("/reshaper", json={"bad": "body"})
        # Past policy: the body is what is wrong.
        assert response.status_code == 400, response.text
        assert "JSON does not validate" in response.text
        assert response.headers["openstack-api-version"] == "placement 1.30"


def test_direct_still_validates_and_applies_policy(db: Any, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text('"placement:resource_providers:list": "!"\n')
    conf = make_conf(oslo_policy__policy_file=str(policy))
    with PlacementDirect(conf, db, microversion="1.20") as http:
        assert http.get("/resource_providers").status_code == 403
        bad = http.post("/resource_providers", json={"name": 5})
        assert bad.status_code == 400
        assert "JSON does not validate" in bad.text
        assert http.get("/reshaper").status_code == 405


def test_direct_builds_its_own_database_from_conf(tmp_path: Path) -> None:
    url = "sqlite:///%s" % (tmp_path / "p.sqlite")
    conf = make_conf(placement_database__connection=url, placement_database__sync_on_startup=True)
    with PlacementDirect(conf) as http:
        made = http.post("/resource_providers", json={"name": "n1"})
        assert made.status_code == 201, made.text
    with PlacementDirect(conf) as http:
        names = [p["name"] for p in http.get("/resource_providers").json()["resource_providers"]]
        assert names == ["n1"]
