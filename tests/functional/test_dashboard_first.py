"""The dashboard's first-hosts page (/dashboard/first), on every database:
the hosts an allocation-candidates query gets first in an order, as GET
/berth/allocation_candidates answers it (the same search), each with the
score explain gives its tree and the free amounts of the weighted
classes; ties said to be drawn at random; bad input as one line in the
page, never a 500."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from berth.api.app import create_app
from berth.db.engine import Database
from support import dashboard_world as w
from support.dashboard_pages import first, page, rows
from tests.conftest import Client, make_conf


def api_roots(client: Client, url: str) -> list[str]:
    """The root of each candidate GET ``url`` answers, in its order."""
    body = client.get(url).json()
    summaries = body["provider_summaries"]
    return [
        summaries[next(iter(req["allocations"]))]["root_provider_uuid"]
        for req in body["allocation_requests"]
    ]


def distinct(roots: list[str]) -> list[str]:
    return list(dict.fromkeys(roots))


def load_host(client: Client, host: int) -> None:
    """Make host ``host`` the fullest tree (a pack order takes it first)."""
    body = {
        "allocations": {w.rp_uuid(host, 1): {"resources": {"VCPU": 60, "MEMORY_MB": 60000}}},
        "project_id": "p",
        "user_id": "u",
        "consumer_generation": None,
        "consumer_type": "INSTANCE",
    }
    assert client.put("/allocations/" + w.consumer_uuid(900), json=body).status_code == 204


def test_default_order_is_the_configured_one(seeded: Client, browser: httpx.Client) -> None:
    html = first(browser, "resources=VCPU:1")
    assert "configured (uuid)</option>" in html
    assert '<b id="order-name">uuid</b>' in html
    shown = rows(html)
    # The API's answer (limit 50: the page's own when none is given).
    want = api_roots(seeded, "/allocation_candidates?resources=VCPU:1&limit=50")
    assert [r["uuid"] for r in shown] == distinct(want)
    assert [r["candidates"] for r in shown] == [want.count(u) for u in distinct(want)]
    assert all(r["score"] is None for r in shown)
    assert "the same for every request" in html
    assert shown[0]["name"] == "compute-01"


def test_configured_scored_order_is_the_default(db: Database) -> None:
    app = create_app(make_conf(berth__candidate_order="spread"), db)
    with Client(app) as client:
        w.seed(client)
    with httpx.Client(
        transport=httpx.WSGITransport(app=app),
        base_url="http://placement.test",
        headers={"accept": "text/html"},
    ) as c:
        html = first(c, "resources=VCPU:1")
    assert "configured (spread)</option>" in html
    assert '<b id="order-name">spread</b>' in html
    assert all(r["score"] is not None for r in rows(html))


def test_pack_takes_the_fullest_host_first_with_its_score(
    seeded: Client, browser: httpx.Client
) -> None:
    load_host(seeded, 10)
    query = "resources=VCPU:1&limit=2"
    html = first(browser, query, order="pack")
    shown = rows(html)
    api = api_roots(seeded, "/berth/allocation_candidates?" + query + "&order=pack")
    # compute-10 has two candidates (one per NUMA cell), but a cut
    # answer gives each host its first before any host its second.
    # (The second is one of several that tie, drawn per request.)
    assert len(shown) == len(distinct(api)) == 2
    assert shown[0]["uuid"] == distinct(api)[0] == w.rp_uuid(10)
    assert shown[0]["name"] == "compute-10"
    assert shown[0]["candidates"] == shown[1]["candidates"] == 1
    assert "(the answer has more: <code>limit=2</code>)" in html
    # The score is the one explain gives the tree in that order.
    explained = seeded.get(
        "/berth/explain/allocation_candidates?resources=VCPU:1&order=pack"
        "&explain_tree=" + w.rp_uuid(10)
    ).json()
    assert shown[0]["score"] == pytest.approx(explained["tree"]["score"], abs=1e-4)
    # Free amounts of the weighted classes, over the tree's providers.
    for rc in ("VCPU", "MEMORY_MB"):
        capacity = used = 0
        for n in (1, 2):
            uuid = w.rp_uuid(10, n)
            inv = seeded.get("/resource_providers/%s/inventories" % uuid).json()["inventories"][rc]
            capacity += int((inv["total"] - inv["reserved"]) * inv["allocation_ratio"])
            used += seeded.get("/resource_providers/%s/usages" % uuid).json()["usages"][rc]
        assert shown[0]["free"][rc] == (capacity - used, capacity)
    # DISK_GB is weighed too: the host's own disk, not the shared pool.
    assert shown[0]["free"]["DISK_GB"] == (480, 480)


def test_spread_lists_best_first_and_says_ties_are_random(
    seeded: Client, browser: httpx.Client
) -> None:
    html = first(browser, "resources=VCPU:1", order="spread")
    shown = rows(html)
    scores = [r["score"] for r in shown]
    assert scores == sorted(scores, reverse=True)
    api = api_roots(seeded, "/berth/allocation_candidates?resources=VCPU:1&order=spread")
    assert {r["uuid"] for r in shown} == set(api)
    # The six loaded hosts come last.
    assert {r["name"] for r in shown[-6:]} == {"compute-%02d" % h for h in range(1, 7)}
    assert re.search(
        r'id="ties">Hosts of equal score come in a random '
        r"order drawn afresh for every request",
        html,
    )


def test_weights_and_preferences(seeded: Client, browser: httpx.Client) -> None:
    load_host(seeded, 10)
    shown = rows(
        first(browser, "resources=VCPU:1", order="spread", prefer="COMPUTE_STATUS_DISABLED:-10")
    )
    # The disabled host goes last, whatever its free capacity.
    assert shown[-1]["name"] == "compute-%02d" % w.DISABLED
    # Weighing VCPU alone: only its column, and the score is its share.
    html = first(browser, "resources=VCPU:1", order="pack", weights="VCPU:2")
    shown = rows(html)
    assert [set(r["free"]) for r in shown] == [{"VCPU"}] * len(shown)
    assert shown[0]["name"] == "compute-10"
    free, capacity = shown[0]["free"]["VCPU"]
    assert shown[0]["score"] == pytest.approx(2 * (capacity - free) / capacity, abs=1e-4)
    assert "weights VCPU 2.0" in html


def test_random_order_has_no_score(seeded: Client, browser: httpx.Client) -> None:
    html = first(browser, "resources=VCPU:1&limit=6", order="random")
    shown = rows(html)
    assert 1 <= len(shown) <= 6 and sum(r["candidates"] for r in shown) == 6
    assert all(r["score"] is None for r in shown)
    assert "<code>random</code> the hosts come in a random order" in html


def test_no_candidate_points_to_explain(seeded: Client, browser: httpx.Client) -> None:
    html = first(browser, "resources=VCPU:1000")
    assert rows(html) == []
    assert "No host gives a candidate" in html
    assert 'href="/dashboard/explain?q=resources%3DVCPU%3A1000"' in html


@pytest.mark.parametrize(
    "query, form, line",
    [
        (
            "resources=VCPU:1",
            {"order": "sideways"},
            "'sideways' is not one of ['uuid', 'random', 'spread', 'pack']",
        ),
        (
            "resources=VCPU:1",
            {"order": "uuid", "weights": "VCPU:1"},
            "weights and prefer apply only to order spread or pack",
        ),
        (
            "resources=VCPU:1",
            {"order": "spread", "weights": "VCPU"},
            "weights: 'VCPU' is not NAME:weight pairs, comma-separated",
        ),
        (
            "resources=VCPU:1",
            {"order": "pack", "prefer": "X:high"},
            "prefer: 'X:high' is not NAME:weight pairs",
        ),
        ("resources=VCPU:1", {"order": "spread", "prefer": "A:1,A:2"}, "prefer names A twice"),
        ("resources=VCPU:1&order=spread", {"order": "pack"}, "order may be given once"),
        ("resourcs=VCPU:1", {}, "unknown query parameter 'resourcs'"),
        ("resources=NOPE:1", {"order": "spread"}, "NOPE"),
        ("resources=VCPU:1&limit=0", {}, "limit must be a whole number from 1 up, not '0'"),
    ],
)
def test_bad_input_is_one_line_in_the_page(
    seeded: Client, browser: httpx.Client, query: str, form: dict[str, str], line: str
) -> None:
    html = first(browser, query, **form)
    error = re.search(r'<p class="error" id="error">(.*?)</p>', html, re.S)
    assert error, html
    text = error.group(1).replace("&#39;", "'")
    assert line in text and "\n" not in text
    assert 'id="first-hosts"' not in html


def test_empty_form_and_policy(app: Any, seeded: Client, browser: httpx.Client) -> None:
    empty = page(browser, "/dashboard/first")
    assert 'id="q"' in empty and 'id="order"' in empty
    assert 'id="first-hosts"' not in empty and 'class="error"' not in empty
    with Client(app, token="someone") as user:
        assert user.get("/dashboard/first").status_code == 403
