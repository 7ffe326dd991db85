"""The dashboard in a real browser (headless chromium): every page loads
with no console error and shows the numbers the API gives; navigation,
search, pagination and the explain and fit forms work; the page reloads
itself when the change sequence moves. Screenshots go to
``tests/browser/screenshots/``."""

from __future__ import annotations

import uuid
from typing import Any

from support import dashboard_world as w
from tests.browser.conftest import Page, api_client


def number(page: Any, selector: str) -> int:
    return int(page.inner_text(selector).replace(",", "").strip())


def test_overview_shows_the_api_totals(tab: Page, server: str) -> None:
    page = tab.go("/dashboard")
    assert page.title() == "Overview · Berth"
    with api_client(server) as api:
        rps = api.get("/resource_providers").json()["resource_providers"]
        assert number(page, "#providers") == len(rps)
        for rc in ("VCPU", "MEMORY_MB", "DISK_GB"):
            capacity = used = 0
            for rp in rps:
                inv = api.get("/resource_providers/%s/inventories"
                              % rp["uuid"]).json()["inventories"].get(rc)
                if inv:
                    capacity += int((inv["total"] - inv["reserved"])
                                    * inv["allocation_ratio"])
                    used += api.get("/resource_providers/%s/usages"
                                    % rp["uuid"]).json()["usages"][rc]
            row = '#cloud tr[data-class="%s"]' % rc
            assert number(page, row + " .capacity") == capacity
            assert number(page, row + " .used") == used
            assert number(page, row + " .free") == capacity - used
    # The six loaded NUMA nodes and the disk pool.
    assert page.locator("#fullest tbody tr").count() == 7
    tab.shot("overview")


def test_navigation_reaches_every_page(tab: Page) -> None:
    page = tab.go("/dashboard")
    for label, title in (("Provider trees", "Provider trees"),
                         ("Consumers", "Consumers"), ("Explain", "Explain"),
                         ("Fit", "Fit"), ("Overview", "Overview")):
        page.click("header nav >> text=%s" % label)
        page.wait_for_load_state()
        assert page.title() == title + " · Berth"
        assert page.inner_text("h1") == title


def test_provider_search_and_pagination(tab: Page) -> None:
    page = tab.go("/dashboard/providers")
    assert page.locator("article.tree").count() == 20
    page.click(".pager >> text=next ›")
    page.wait_for_load_state()
    assert page.locator("article.tree").count() == w.HOSTS + 1 - 20
    assert "page 2 of 2" in page.inner_text(".pager")
    page.select_option("#by", "trait")
    page.fill("#q", "HW_CPU_X86_AVX2")
    page.click("form.search button")
    page.wait_for_load_state()
    assert page.locator("article.tree").count() == w.HOSTS // 3
    assert page.locator(".node.matched").count() == 2 * (w.HOSTS // 3)
    page.select_option("#by", "aggregate")
    page.fill("#q", w.AGG)
    page.click("form.search button")
    page.wait_for_load_state()
    assert page.locator("article.tree").count() == 9
    pool = page.locator('article.tree[data-root="%s"]' % w.POOL)
    assert "shares with 8 other trees" in pool.inner_text()
    page.locator('article.tree[data-root="%s"]' % w.rp_uuid(1)
                 ).scroll_into_view_if_needed()
    tab.shot("providers")


def test_consumers_by_project_match_usages(tab: Page, server: str) -> None:
    page = tab.go("/dashboard/consumers")
    assert page.locator("#consumers tbody tr").count() == 50
    page.click(".pager >> text=next ›")
    page.wait_for_load_state()
    assert page.locator("#consumers tbody tr").count() == w.CONSUMERS - 50
    page.click(".tabs >> text=by project")
    page.wait_for_load_state()
    with api_client(server) as api:
        for project in ("project-0", "project-1"):
            usages = api.get("/usages?project_id=" + project, headers={
                "openstack-api-version": "placement 1.9"}).json()["usages"]
            row = '#consumers tr[data-key="%s"]' % project
            for rc, n in usages.items():
                assert number(page, row + ' td[data-class="%s"]' % rc) == n
    tab.shot("consumers")


def test_explain_and_fit_forms(tab: Page, server: str) -> None:
    query = "resources=VCPU:8,MEMORY_MB:16384&required=HW_CPU_X86_AVX2"
    with api_client(server) as api:
        explained = api.get("/berth/explain/allocation_candidates?"
                            + query).json()
        fitted = api.get("/berth/fit?" + query).json()
    page = tab.go("/dashboard/explain")
    page.fill("#q", query)
    page.click("form.query button")
    page.wait_for_load_state()
    assert number(page, "#considered") == explained["trees"]["considered"]
    assert number(page, "#excluded") == explained["trees"]["excluded"]
    reasons = page.locator("#reasons tr[data-reason]")
    assert reasons.count() == len(explained["reasons"])
    tab.shot("explain")
    page = tab.go("/dashboard/fit")
    page.fill("#q", query)
    page.click("form.query button")
    page.wait_for_load_state()
    assert number(page, "#placed") == fitted["total"]["placed"]
    assert number(page, "#upper-bound") == fitted["total"]["upper_bound"]
    tab.shot("fit")
    page.fill("#q", "resources=NOT_A_CLASS:1")
    page.click("form.query button")
    page.wait_for_load_state()
    assert "NOT_A_CLASS" in page.inner_text("#error")


def test_live_refresh_follows_the_change_sequence(tab: Page,
                                                  server: str) -> None:
    page = tab.go("/dashboard")
    before = number(page, "#cloud tr[data-class=VCPU] .used")
    seq = number(page, "#seq")
    body = {"allocations": {w.rp_uuid(20, 1): {"resources": {"VCPU": 3}}},
            "project_id": "p", "user_id": "u", "consumer_generation": None,
            "consumer_type": "INSTANCE"}
    with api_client(server) as api:
        resp = api.put("/allocations/%s" % uuid.uuid4(), json=body)
        assert resp.status_code == 204, resp.text
    # The poller runs every 5 s; the page reloads with the new numbers.
    page.wait_for_function(
        "s => Number(document.getElementById('seq').textContent) > s",
        arg=seq, timeout=20000)
    assert number(page, "#cloud tr[data-class=VCPU] .used") == before + 3
