"""The dashboard in a real browser (headless chromium): every page loads
with no console error and shows the numbers the API gives; names stand
for uuids, sizes are in binary units, trees come by name and a disabled
host is marked; navigation, search, pagination and the explain and fit
forms work, and their errors are one line; every page fits an 800 px
window with no clipped number; a browser refused on a dashboard route
gets an HTML page; the first-hosts form lists hosts in the order chosen;
live refresh reads the change feed and re-renders only the parts a
change touches (and nothing without one), falls back to polling the
sequence number when the feed refuses (403) and reloads on 410.
Screenshots go to ``tests/browser/screenshots/``."""

from __future__ import annotations

import uuid
from typing import Any

from support import dashboard_world as w
from support.dashboard_pages import PAGES
from tests.browser.conftest import Page, api_client


def number(page: Any, selector: str) -> int:
    return int(page.inner_text(selector).replace(",", "").strip())


def value(page: Any, selector: str) -> int:
    """The exact amount a cell shows (in a unit, for a size)."""
    return int(page.get_attribute(selector, "data-value"))


def test_overview_shows_the_api_totals(tab: Page, server: str) -> None:
    page = tab.go("/dashboard")
    assert page.title() == "Overview · Berth"
    with api_client(server) as api:
        rps = api.get("/resource_providers").json()["resource_providers"]
        assert number(page, "#providers") == len(rps)
        for rc in ("VCPU", "MEMORY_MB", "DISK_GB"):
            capacity = used = 0
            for rp in rps:
                inv = (
                    api.get("/resource_providers/%s/inventories" % rp["uuid"])
                    .json()["inventories"]
                    .get(rc)
                )
                if inv:
                    capacity += int((inv["total"] - inv["reserved"]) * inv["allocation_ratio"])
                    used += api.get("/resource_providers/%s/usages" % rp["uuid"]).json()["usages"][
                        rc
                    ]
            row = '#cloud tr[data-class="%s"]' % rc
            assert value(page, row + " .capacity") == capacity
            assert value(page, row + " .used") == used
            assert value(page, row + " .free") == capacity - used
    # The six loaded NUMA nodes and the disk pool.
    assert page.locator("#fullest tbody tr").count() == 7
    tab.shot("overview")


def test_navigation_reaches_every_page(tab: Page) -> None:
    page = tab.go("/dashboard")
    for label, title in (
        ("Provider trees", "Provider trees"),
        ("Consumers", "Consumers"),
        ("Explain", "Explain"),
        ("Fit", "Fit"),
        ("First hosts", "First hosts"),
        ("Overview", "Overview"),
    ):
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
    page.locator('article.tree[data-root="%s"]' % w.rp_uuid(1)).scroll_into_view_if_needed()
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
            usages = api.get(
                "/usages?project_id=" + project, headers={"openstack-api-version": "placement 1.9"}
            ).json()["usages"]
            row = '#consumers tr[data-key="%s"]' % project
            for rc, n in usages.items():
                assert value(page, row + ' td[data-class="%s"]' % rc) == n
    tab.shot("consumers")


def test_explain_and_fit_forms(tab: Page, server: str) -> None:
    query = "resources=VCPU:8,MEMORY_MB:16384&required=HW_CPU_X86_AVX2"
    with api_client(server) as api:
        explained = api.get("/berth/explain/allocation_candidates?" + query).json()
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


def test_form_errors_are_one_line(tab: Page) -> None:
    page = tab.go("/dashboard/explain")
    page.fill("#q", "resourcs=VCPU:1&limt=2")
    page.click("form.query button")
    page.wait_for_load_state()
    line = page.inner_text("#error")
    # Two unknown parameters: the first is named, with the nearest name.
    assert line == ("unknown query parameter 'limt' (did you mean limit?)")
    assert page.locator("#error").bounding_box()["height"] < 50  # one line
    page.fill("#q", "resources=NOT_A_CLASS:1")
    page.click("form.query button")
    page.wait_for_load_state()
    assert "NOT_A_CLASS" in page.inner_text("#error")
    assert "-1" not in page.inner_text("header")
    assert number(page, "#seq") > 0
    tab.shot("explain-error")


def test_names_units_and_disabled_hosts(tab: Page) -> None:
    page = tab.go("/dashboard")
    memory = page.inner_text("#cloud tr[data-class=MEMORY_MB] .capacity")
    assert memory == "2.98 TiB"
    assert (
        page.get_attribute("#cloud tr[data-class=MEMORY_MB] .capacity", "title") == "3,121,152 MB"
    )
    disabled = page.locator("#fullest tr.disabled")
    assert disabled.count() == 1
    assert "compute-%02d-numa" % w.DISABLED in disabled.inner_text()
    assert disabled.locator(".tag.disabled").is_visible()
    aggregate = page.inner_text('#aggregates tr[data-aggregate="%s"] a' % w.AGG)
    assert aggregate == "compute-01, compute-02, compute-03 and 6 more"
    page = tab.go("/dashboard/providers")
    roots = page.locator("article.tree").evaluate_all("els => els.map(e => e.dataset.name)")
    assert roots == ["compute-%02d" % h for h in range(1, 21)]
    host = page.locator("article.tree.disabled")
    assert host.count() == 1
    assert host.get_attribute("data-root") == w.rp_uuid(w.DISABLED)
    assert host.locator(".tag.disabled").is_visible()
    page = tab.go("/dashboard/fit?q=resources%3DVCPU%3A4%2CMEMORY_MB%3A4096")
    first = page.locator("#fit-trees a.provider").first
    assert first.inner_text().startswith("compute-")
    assert first.get_attribute("title") == first.get_attribute("data-uuid")
    assert "compute-01" in page.inner_text("#fit-aggregates")
    page = tab.go("/dashboard/explain?q=resources%3DMEMORY_MB%3A65536")
    examples = page.locator("#reasons .example a.provider")
    assert examples.count() > 0
    for name in examples.all_inner_texts():
        assert name.startswith(("compute-", "disk-pool")), name
    assert "needs 64 GiB" in page.inner_text("#reasons")


#: Cells, numbers and the page itself wider than their box (clipped or
#: sticking out): what an 800 px window must not show.
OVERFLOWS = """() => {
  const out = [];
  for (const el of document.querySelectorAll("td, th, .n, .nums, table")) {
    if (el.scrollWidth > el.clientWidth + 1) {
      out.push(el.tagName + "." + el.className + ": " + el.textContent.trim().slice(0, 40));
    }
  }
  const main = document.querySelector("main").getBoundingClientRect();
  for (const t of document.querySelectorAll("table")) {
    if (t.getBoundingClientRect().right > main.right + 1) {
      out.push("table " + (t.id || t.className) + " wider than the page");
    }
  }
  if (document.documentElement.scrollWidth > window.innerWidth) {
    out.push("the page scrolls sideways");
  }
  return out;
}"""


def test_every_page_fits_800_px(chromium: Any, server: str) -> None:
    context = chromium.new_context(viewport={"width": 800, "height": 900})
    tab = Page(context.new_page(), server)
    try:
        for path in PAGES:
            page = tab.go(path)
            assert page.evaluate(OVERFLOWS) == [], path
        tab.go("/dashboard")
        tab.shot("overview-800")
        tab.go(PAGES[2])
        tab.shot("providers-800")
        tab.go(PAGES[5])
        tab.shot("explain-800")
        assert tab.errors == []
    finally:
        context.close()


def test_browser_routes_answer_html_error_pages(tab: Page, server: str) -> None:
    for path, status, line in (
        ("/dashboard/nope", 404, "There is no dashboard page at /dashboard/nope."),
        ("/dashboard?page=abc", 400, "page must be a positive integer"),
    ):
        response = tab.page.goto(server + path)
        assert response.status == status
        assert response.headers["content-type"].startswith("text/html")
        page = tab.page
        assert page.inner_text("h1").startswith(str(status))
        assert page.inner_text("#error") == line
        # The dashboard's look: its header and stylesheet.
        assert page.locator("header nav a").count() == 6
        assert (
            page.evaluate("getComputedStyle(document.querySelector('header')).backgroundColor")
            == "rgb(31, 43, 61)"
        )
    tab.shot("error")
    # The two refusals were meant; nothing else failed.
    assert [e.split(" ")[0] for e in tab.errors if e[:1].isdigit()] == ["404", "400"]
    tab.errors.clear()
    with api_client(server) as api:
        resp = api.get("/dashboard/nope")
        assert resp.status_code == 404
        assert resp.json()["errors"][0]["status"] == 404


def test_first_hosts_form(tab: Page, server: str) -> None:
    query = "resources=VCPU:4&limit=10"
    page = tab.go("/dashboard/first")
    page.fill("#q", query)
    page.select_option("#order", "pack")
    page.click("form.query button")
    page.wait_for_load_state()
    rows = page.locator("#first-hosts tbody tr[data-uuid]")
    with api_client(server) as api:
        body = api.get("/berth/allocation_candidates?%s&order=pack" % query).json()
    summaries = body["provider_summaries"]
    roots = list(
        dict.fromkeys(
            summaries[next(iter(r["allocations"]))]["root_provider_uuid"]
            for r in body["allocation_requests"]
        )
    )
    # Ties are drawn per request: the same number of hosts, best first.
    assert rows.count() == len(roots) > 0
    scores = [float(x) for x in page.locator("#first-hosts td.score").all_inner_texts()]
    assert scores == sorted(scores, reverse=True)
    assert len(scores) == rows.count()
    assert "random order drawn afresh for every request" in page.inner_text("#ties")
    assert page.locator("#order").input_value() == "pack"
    tab.shot("first")
    page.fill("#weights", "VCPU")
    page.click("form.query button")
    page.wait_for_load_state()
    assert "is not NAME:weight pairs" in page.inner_text("#error")
    assert page.locator("#error").bounding_box()["height"] < 50


#: Counts re-renders and marks the page, so that a reload (which drops
#: both) shows.
WATCH = """() => {
  window.kept = true;
  window.rerendered = 0;
  document.body.addEventListener("berth:rerendered",
                                 () => { window.rerendered += 1; });
  for (const id of ["counts", "cloud", "fullest"]) {
    document.getElementById(id).dataset.old = "1";
  }
}"""


def claim(server: str, vcpu: int) -> None:
    body = {
        "allocations": {w.rp_uuid(20, 1): {"resources": {"VCPU": vcpu}}},
        "project_id": "p",
        "user_id": "u",
        "consumer_generation": None,
        "consumer_type": "INSTANCE",
    }
    with api_client(server) as api:
        resp = api.put("/allocations/%s" % uuid.uuid4(), json=body)
        assert resp.status_code == 204, resp.text


def asked(page: Any) -> list[str]:
    """The URLs the page requests from now on."""
    urls: list[str] = []
    page.on("request", lambda r: urls.append(r.url))
    return urls


def refused(tab: Page, status: int) -> None:
    """The only errors the tab saw were the feed's refusals (``status``,
    as the response and as chromium's console line for it; a feed
    request a reload cut short fails)."""
    assert tab.errors
    for e in tab.errors:
        assert (
            e.startswith("%d " % status)
            or ("status of %d" % status in e)
            or (e.startswith("request failed: ") and "/dashboard/changes?" in e)
        ), e
    tab.errors.clear()


def test_live_refresh_reads_the_feed_and_rerenders_what_changed(tab: Page, server: str) -> None:
    page = tab.go("/dashboard")
    urls = asked(page)
    page.evaluate(WATCH)
    before = value(page, "#cloud tr[data-class=VCPU] .used")
    seq = number(page, "#seq")
    shown = page.evaluate("document.body.dataset.position")
    # Nothing changed: a feed request (every 5 s), no re-render.
    with page.expect_response(lambda r: "/dashboard/changes?" in r.url, timeout=15000) as quiet:
        pass
    assert quiet.value.status == 200 and quiet.value.json()["events"] == []
    assert "after=%s&limit=50&kind=" % shown.replace(":", "%3A") in quiet.value.url
    page.wait_for_timeout(500)
    assert page.evaluate("window.rerendered") == 0
    assert page.evaluate("document.getElementById('cloud').dataset.old") == "1"
    claim(server, 3)
    page.wait_for_function("() => window.rerendered > 0", timeout=20000)
    assert value(page, "#cloud tr[data-class=VCPU] .used") == before + 3
    assert number(page, "#seq") > seq
    # Re-rendered in place (no reload), only the parts an allocation
    # touches: the cloud and fullest tables, not the provider counts.
    assert page.evaluate("window.kept") is True
    marks = page.evaluate("""() => ["counts", "cloud", "fullest"].map(
        id => document.getElementById(id).dataset.old || null)""")
    assert marks == ["1", None, None]
    assert len([u for u in urls if "/dashboard/changes?" in u]) >= 2
    assert not any(u.endswith("/dashboard/seq") for u in urls)
    # One page fetch: the re-render after the write.
    assert [u for u in urls if u.endswith("/dashboard")] == [server + "/dashboard"]


def test_live_refresh_without_the_feed_polls_the_sequence(tab: Page, server: str) -> None:
    """A user who may see the dashboard but not the feed (403): the page
    polls /dashboard/seq instead, as it did before the feed, and
    re-renders on a change."""
    tab.page.route(
        "**/dashboard/changes?**",
        lambda route: route.fulfill(
            status=403,
            content_type="application/json",
            body='{"errors": [{"status": 403, "title": "Forbidden"}]}',
        ),
    )
    page = tab.go("/dashboard")
    urls = asked(page)
    page.evaluate(WATCH)
    before = value(page, "#cloud tr[data-class=VCPU] .used")
    with page.expect_request(lambda r: r.url.endswith("/dashboard/seq"), timeout=20000):
        pass
    claim(server, 2)
    page.wait_for_function("() => window.rerendered > 0", timeout=20000)
    assert value(page, "#cloud tr[data-class=VCPU] .used") == before + 2
    assert page.evaluate("window.kept") is True
    # The feed was asked once; then only the sequence.
    assert len([u for u in urls if "/dashboard/changes?" in u]) == 1
    refused(tab, 403)


def test_live_refresh_reloads_when_the_position_is_too_old(tab: Page) -> None:
    tab.page.route(
        "**/dashboard/changes?**",
        lambda route: route.fulfill(
            status=410,
            content_type="application/json",
            body='{"errors": [{"status": 410, "title": "Gone"}]}',
        ),
    )
    page = tab.go("/dashboard")
    page.evaluate(WATCH)
    page.wait_for_function("() => window.kept === undefined", timeout=20000)
    page.unroute("**/dashboard/changes?**")
    page.wait_for_load_state()
    assert page.title() == "Overview · Berth"
    refused(tab, 410)
