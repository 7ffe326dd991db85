"""What the dashboard's live refresh stands on, on every database: each
page carries the change feed position it reflects and marks its parts
with the event kinds that change them; the feed answers the pages under
/dashboard (the feed's own handler and policy), with the kinds they ask
for; a caller who may see the dashboard but not the feed gets 403 there
(the pages then poll /dashboard/seq) and 410 for a position too old.
The script itself runs in tests/browser/test_dashboard_browser.py."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from berth.api.app import create_app
from berth.api.views.dashboard_page import LIVE
from berth.db import events
from berth.db.engine import Database
from support import dashboard_world as w
from support.dashboard_pages import page
from tests.conftest import Client, make_conf

PAGES = (
    "/dashboard",
    "/dashboard/providers",
    "/dashboard/consumers",
    "/dashboard/explain?q=resources%3DVCPU%3A1",
    "/dashboard/fit?q=resources%3DVCPU%3A1",
    "/dashboard/first?q=resources%3DVCPU%3A1",
)


def position(html: str) -> str:
    m = re.search(r'<body data-seq="\d+" data-position="([^"]+)">', html)
    assert m, html[:500]
    return m.group(1)


def parts(html: str) -> dict[str, str]:
    """Each live part's id -> the kinds that change it."""
    return dict(re.findall(r'id="([^"]+)" data-live="([^"]*)"', html))


def claim(client: Client, n: int) -> None:
    body = {
        "allocations": {w.rp_uuid(12, 1): {"resources": {"VCPU": 1}}},
        "project_id": "p",
        "user_id": "u",
        "consumer_generation": None,
        "consumer_type": "INSTANCE",
    }
    assert client.put("/allocations/" + w.consumer_uuid(800 + n), json=body).status_code == 204


def test_pages_carry_their_position_and_live_parts(seeded: Client, browser: httpx.Client) -> None:
    for url in PAGES:
        html = page(browser, url)
        # The position covers every write the page shows: the feed's
        # newest, as no write ran since.
        feed = seeded.get("/berth/changes", params={"after": position(html)}).json()
        assert feed["events"] == [], url
        assert position(html) == feed["position"], url
        found = parts(html)
        assert found, url
        for kinds in found.values():
            assert set(filter(None, kinds.split(","))) <= set(events.KINDS)
    overview = parts(page(browser, "/dashboard"))
    assert overview == {
        "counts": LIVE["counts"],
        "cloud": LIVE["capacity"],
        "fullest": LIVE["fullest"],
        "per-aggregate": LIVE["aggregates"],
    }
    assert parts(page(browser, "/dashboard/consumers")) == {
        "consumer-rows": "allocations.replaced,allocations.removed"
    }
    # A query's answer changes with anything.
    assert parts(page(browser, PAGES[-1])) == {"report": ""}


def test_the_feed_answers_the_pages_as_it_answers_the_api(
    seeded: Client, browser: httpx.Client
) -> None:
    html = page(browser, "/dashboard")
    kinds = ",".join(sorted({k for v in parts(html).values() for k in v.split(",")} | {"resync"}))
    after = position(html)
    url = "/dashboard/changes?after=%s&limit=50&kind=%s" % (after, kinds)
    quiet = browser.get(url, headers={"accept": "application/json"})
    assert quiet.status_code == 200
    assert quiet.json() == {"position": after, "more": False, "events": []}
    claim(seeded, 1)
    # The browser sends no token: under noauth2, on /dashboard paths,
    # that is admin, as for the pages.
    moved = browser.get(url, headers={"accept": "application/json"}).json()
    assert [e["kind"] for e in moved["events"]] == ["allocations.replaced"]
    assert moved == seeded.get(url.replace("/dashboard/", "/berth/")).json()
    # The page built after the write reflects that position.
    assert position(page(browser, "/dashboard")) == moved["position"]
    # Only the kinds asked for: a trait set is not the consumers page's.
    consumers = ",".join(parts(page(browser, "/dashboard/consumers")).values())
    assert seeded.put("/traits/CUSTOM_LIVE").status_code == 201
    gen = seeded.get("/resource_providers/" + w.rp_uuid(12)).json()["generation"]
    assert (
        seeded.put(
            "/resource_providers/%s/traits" % w.rp_uuid(12),
            json={"traits": ["CUSTOM_LIVE"], "resource_provider_generation": gen},
        ).status_code
        == 200
    )
    only = browser.get(
        "/dashboard/changes",
        params={"after": moved["position"], "kind": consumers + ",resync"},
        headers={"accept": "application/json"},
    ).json()
    assert only["events"] == [] and only["position"] != moved["position"]


def test_feed_errors_are_json_for_the_script(seeded: Client, browser: httpx.Client) -> None:
    # The feed's errors are the Placement error the script reads, never
    # a dashboard page (not even for a request asking for HTML).
    bad = browser.get("/dashboard/changes?after=nope", headers={"accept": "application/json"})
    assert bad.status_code == 400
    assert bad.json()["errors"][0]["status"] == 400
    html = browser.get("/dashboard/changes?after=0")
    assert html.status_code == 406
    assert "dashboard.css" not in html.text and "<nav>" not in html.text
    ahead = browser.get(
        "/dashboard/changes?after=1:999999999", headers={"accept": "application/json"}
    )
    assert ahead.status_code == 410
    assert ahead.json()["errors"][0]["status"] == 410


def test_a_dashboard_reader_refused_the_feed_falls_back(db: Database, tmp_path: Path) -> None:
    """A user who may read the dashboard but not the feed: the pages
    answer, the feed under /dashboard answers 403 (the script then polls
    /dashboard/seq, which answers)."""
    rules = tmp_path / "policy.yaml"
    rules.write_text('"berth:dashboard": "role:operator"\n')
    app = create_app(make_conf(oslo_policy__policy_file=str(rules)), db)
    with Client(app) as admin:
        w.seed(admin)
    with httpx.Client(
        transport=httpx.WSGITransport(app=app),
        base_url="http://placement.test",
        headers={"x-auth-token": "ops:ops", "x-roles": "operator", "accept": "application/json"},
    ) as ops:
        html = ops.get("/dashboard", headers={"accept": "text/html"})
        assert html.status_code == 200
        after = position(html.text)
        feed = ops.get("/dashboard/changes?after=" + after)
        assert feed.status_code == 403
        assert "berth:changes:list" in feed.json()["errors"][0]["detail"]
        assert ops.get("/berth/changes?after=" + after).status_code == 403
        seq = ops.get("/dashboard/seq")
        assert seq.status_code == 200 and int(seq.text) > 0
