"""The dashboard over HTTP, on every database: each page renders the
numbers the API gives (sizes in binary units), names for uuids, trees by
name, disabled hosts marked, search and pagination, the explain and fit
forms and their one-line errors, policy, noauth2 in a browser, HTML
error pages for a browser (JSON for an API client), and the 304 of an
unchanged page."""

from __future__ import annotations

import re
from typing import Any

import httpx

from support import dashboard_world as w
from support.dashboard_pages import api_totals, page
from support.plain_words import plain_line
from tests.conftest import Client


def cell(html: str, row_attr: str, klass: str) -> int:
    """The exact amount of the cell ``klass`` of the row ``row_attr``
    (the cell shows it in a unit, the number is in ``data-value``)."""
    m = re.search(
        r'<tr %s>.*?class="n %s"[^>]*data-value="(-?\d+)"' % (re.escape(row_attr), klass),
        html,
        re.S,
    )
    assert m, (row_attr, klass)
    return int(m.group(1))


def test_overview_matches_the_api(seeded: Client, browser: httpx.Client) -> None:
    html = page(browser, "/dashboard")
    totals = api_totals(seeded)
    assert set(totals) == {"VCPU", "MEMORY_MB", "DISK_GB"}
    for rc, want in totals.items():
        row = 'data-class="%s"' % rc
        assert cell(html, row, "capacity") == want["capacity"]
        assert cell(html, row, "used") == want["used"]
        assert cell(html, row, "free") == want["capacity"] - want["used"]
    assert '<span id="providers">%d</span>' % (w.HOSTS * 3 + 1) in html
    # The six loaded hosts' NUMA nodes are the fullest.
    fullest = re.findall(
        r"compute-(\d\d)-numa\d", html.split('id="fullest"')[1].split("</table>")[0]
    )
    assert sorted({int(h) for h in fullest}) == list(range(1, 7))
    assert len(fullest) == 6
    assert w.AGG in html


def test_provider_search_and_pages(seeded: Client, browser: httpx.Client) -> None:
    first = page(browser, "/dashboard/providers")
    assert "%d trees." % (w.HOSTS + 1) in first
    assert first.count('<article class="tree') == 20
    assert "page 1 of 2" in first
    second = page(browser, "/dashboard/providers?by=name&q=&page=2")
    assert second.count('<article class="tree') == w.HOSTS + 1 - 20
    by_trait = page(browser, "/dashboard/providers?by=trait&q=HW_CPU_X86_AVX2")
    assert by_trait.count('<article class="tree') == w.HOSTS // 3
    assert "compute-03-numa1" in by_trait
    by_name = page(browser, "/dashboard/providers?by=name&q=compute-07")
    assert by_name.count('<article class="tree') == 1
    by_uuid = page(browser, "/dashboard/providers?by=uuid&q=" + w.rp_uuid(2, 1))
    assert 'data-root="%s"' % w.rp_uuid(2) in by_uuid
    by_agg = page(browser, "/dashboard/providers?by=aggregate&q=" + w.AGG)
    # Eight hosts and the pool itself, which shares with them.
    assert by_agg.count('<article class="tree') == 9
    assert "shares with 8 other trees" in by_agg
    assert "uses shared resources of:" in by_agg
    none = page(browser, "/dashboard/providers?by=name&q=%25_nothing")
    assert "No tree matches." in none


def test_consumers_views(seeded: Client, browser: httpx.Client) -> None:
    html = page(browser, "/dashboard/consumers")
    assert html.count("<tr data-key=") == 50
    assert "page 1 of 2" in html
    rest = page(browser, "/dashboard/consumers?view=consumer&page=2")
    assert rest.count("<tr data-key=") == w.CONSUMERS - 50
    for project in ("project-0", "project-1"):
        usages = seeded.at("1.9").get("/usages?project_id=" + project).json()["usages"]
        html = page(browser, "/dashboard/consumers?view=project")
        row = re.search(r'<tr data-key="%s">(.*?)</tr>' % project, html, re.S)
        assert row
        for rc, n in usages.items():
            assert re.search(r'data-class="%s" data-value="%d"' % (rc, n), row.group(1))
    types = page(browser, "/dashboard/consumers?view=type")
    assert 'data-key="INSTANCE"' in types and 'data-key="MIGRATION"' in types
    users = page(browser, "/dashboard/consumers?view=user")
    assert users.count("<tr data-key=") == 3


def test_explain_and_fit_forms_match_the_api(seeded: Client, browser: httpx.Client) -> None:
    query = "resources=VCPU:8,MEMORY_MB:16384&required=HW_CPU_X86_AVX2"
    api = seeded.get("/berth/explain/allocation_candidates?" + query).json()
    html = page(browser, "/dashboard/explain?" + httpx.QueryParams({"q": query}).__str__())
    assert 'id="considered">%d<' % api["trees"]["considered"] in html
    assert 'id="excluded">%d<' % api["trees"]["excluded"] in html
    for reason in api["reasons"]:
        assert 'data-reason="%s"' % reason["reason"] in html
    fit = seeded.get("/berth/fit?" + query).json()
    html = page(
        browser, "/dashboard/fit?q=" + httpx.QueryParams({"x": query})["x"].replace("&", "%26")
    )
    assert 'id="placed">{:,}<'.format(fit["total"]["placed"]) in html
    bad = page(browser, "/dashboard/fit?q=resources%3DNOPE%3A1")
    assert 'class="error"' in bad and "NOPE" in bad
    empty = page(browser, "/dashboard/explain")
    assert 'id="q"' in empty and "considered" not in empty


def test_unchanged_page_is_304_until_a_write(seeded: Client, browser: httpx.Client) -> None:
    first = browser.get("/dashboard")
    tag = first.headers["etag"]
    seq = browser.get("/dashboard/seq").text
    assert tag == '"seq-%s"' % seq
    again = browser.get("/dashboard", headers={"if-none-match": tag})
    assert again.status_code == 304 and again.content == b""
    body = {
        "allocations": {w.rp_uuid(9, 1): {"resources": {"VCPU": 1}}},
        "project_id": "p",
        "user_id": "u",
        "consumer_generation": None,
        "consumer_type": "INSTANCE",
    }
    assert seeded.put("/allocations/" + w.consumer_uuid(999), json=body).status_code == 204
    assert int(browser.get("/dashboard/seq").text) > int(seq)
    fresh = browser.get("/dashboard", headers={"if-none-match": tag})
    assert fresh.status_code == 200 and fresh.headers["etag"] != tag


def test_policy_and_bad_parameters(app: Any, browser: httpx.Client) -> None:
    with Client(app, token="someone") as user:
        resp = user.get("/dashboard")
        assert resp.status_code == 403
        assert "berth:dashboard" in resp.json()["errors"][0]["detail"]
        assert user.get("/dashboard/seq").status_code == 403
    for url in (
        "/dashboard?page=x",
        "/dashboard/providers?by=colour",
        "/dashboard/consumers?view=nobody",
    ):
        resp = browser.get(url)
        # A browser asked for HTML, so the error comes as HTML.
        assert resp.status_code == 400, url
        assert "must be" in resp.text
    css = browser.get("/dashboard/static/dashboard.css")
    assert css.status_code == 200 and "text/css" in css.headers["content-type"]
    assert browser.get("/dashboard/static/x.js").status_code == 404
    assert browser.post("/dashboard").status_code == 405


def test_sizes_in_binary_units() -> None:
    from berth.api.views.dashboard import amount

    assert amount(2_613_248, "MEMORY_MB") == "2.49 TiB"
    assert amount(65_024, "MEMORY_MB") == "63.5 GiB"
    assert amount(512, "MEMORY_MB") == "512 MiB"
    assert amount(9_600, "DISK_GB") == "9.38 TiB"
    assert amount(-2_048, "CUSTOM_SCRATCH_MB") == "-2 GiB"
    assert amount(1_234_567, "VCPU") == "1,234,567"
    assert amount(3, "CUSTOM_PCI_SB") == "3"


def test_overview_speaks_in_names_and_units(seeded: Client, browser: httpx.Client) -> None:
    html = page(browser, "/dashboard")
    memory = re.search(r'<tr data-class="MEMORY_MB">(.*?)</tr>', html, re.S)
    assert memory and 'title="3,121,152 MB">2.98 TiB<' in memory.group(1)
    aggregate = html.split('data-aggregate="%s"' % w.AGG)[1].split("</tr>")[0]
    assert "compute-01, compute-02, compute-03 and 6 more" in aggregate
    fullest = html.split('id="fullest"')[1].split("</table>")[0]
    row = re.search(r'<tr class="disabled">.*?</tr>', fullest, re.S)
    assert row and "compute-%02d-numa" % w.DISABLED in row.group(0)
    assert fullest.count('class="tag disabled"') == 1  # its loaded NUMA node


def test_trees_by_name_and_disabled_hosts(seeded: Client, browser: httpx.Client) -> None:
    first = page(browser, "/dashboard/providers")
    names = re.findall(
        r'<article class="tree[^"]*" data-root="[^"]*" '
        r'data-name="([^"]*)"',
        first,
    )
    assert names == ["compute-%02d" % h for h in range(1, 21)]
    last = page(browser, "/dashboard/providers?page=2")
    assert re.findall(r'data-name="([^"]*)"', last)[-1] == "disk-pool"
    assert first.count('<article class="tree disabled"') == 1
    assert (
        'data-root="%s" data-name="compute-%02d"' % (w.rp_uuid(w.DISABLED), w.DISABLED)
        in first.split('<article class="tree disabled"')[1][:200]
    )


def test_explain_and_fit_name_providers(seeded: Client, browser: httpx.Client) -> None:
    query = "resources=VCPU:8,MEMORY_MB:16384&required=HW_CPU_X86_AVX2"
    explain = page(browser, "/dashboard/explain?" + str(httpx.QueryParams({"q": query})))
    examples = re.findall(
        r'class="provider" data-uuid="([^"]+)" '
        r'title="[^"]+" href="[^"]+">([^<]+)<',
        explain,
    )
    assert examples and all(name.startswith(("compute-", "disk-pool")) for _, name in examples)
    capacity = page(browser, "/dashboard/explain?q=resources%3DMEMORY_MB%3A65536")
    assert "MEMORY_MB: needs 64 GiB, most free 63.5 GiB" in capacity
    fit = page(browser, "/dashboard/fit?" + str(httpx.QueryParams({"q": "resources=VCPU:1"})))
    rows = fit.split('id="fit-trees"')[1].split("</table>")[0]
    assert 'data-uuid="%s"' % w.rp_uuid(24) in rows and ">compute-24<" in rows
    aggs = fit.split('id="fit-aggregates"')[1].split("</table>")[0]
    assert "compute-01, compute-02, compute-03" in aggs and w.AGG in aggs


def test_form_errors_are_one_line(seeded: Client, browser: httpx.Client) -> None:
    bad = page(browser, "/dashboard/explain?q=resourcs%3DVCPU%3A1")
    line = re.search(r'<p class="error" id="error">(.*?)</p>', bad, re.S)
    assert line and line.group(1) == (
        "unknown query parameter &#39;resourcs&#39; (did you mean resources?)"
    )
    unknown = page(browser, "/dashboard/explain?q=resources%3DNOPE%3A1")
    assert "NOPE" in unknown and "seq -1" not in unknown
    assert 'data-seq="-1"' not in unknown
    assert re.search(r'<span id="seq">\d+</span>', unknown)
    form = page(browser, "/dashboard/fit?q=resources%3DVCPU")
    assert "Badly formed resources parameter" in form
    for query, want in (
        (
            "resources=VCPUS:2",
            "Invalid resource class in resources "
            "parameter: No such resource class VCPUS (did you mean "
            "VCPU?).",
        ),
        ("resources=VCPU:4&limit=abc", "limit must be a whole number from 1 up, not &#39;abc&#39;"),
    ):
        said = page(browser, "/dashboard/fit?" + str(httpx.QueryParams({"q": query})))
        found = re.search(r'<p class="error" id="error">(.*?)</p>', said, re.S)
        assert found and plain_line(found.group(1)) == want


def test_browser_routes_answer_html_error_pages(seeded: Client, browser: httpx.Client) -> None:
    for url, status in (
        ("/dashboard/nope", 404),
        ("/dashboard?page=abc", 400),
        ("/dashboard/providers?by=colour", 400),
    ):
        resp = browser.get(url)
        assert resp.status_code == status, url
        assert resp.headers["content-type"].startswith("text/html")
        assert '<link rel="stylesheet" href="/dashboard/static/' in resp.text
        assert '<h1 id="status">%d ' % status in resp.text
        assert len(re.findall(r'id="error">[^<\n]+</p>', resp.text)) == 1
    assert "There is no dashboard page at /dashboard/nope." in browser.get("/dashboard/nope").text
    post = browser.post("/dashboard")
    assert post.status_code == 405 and "GET" in post.headers["allow"]
    assert "The method POST is not allowed" in post.text
    # An API client asking for JSON gets the Placement error.
    for url, status in (("/dashboard/nope", 404), ("/dashboard?page=abc", 400)):
        resp = seeded.get(url)
        assert resp.status_code == status
        assert resp.json()["errors"][0]["status"] == status


def test_explain_page_names_the_providers_the_api_blames(
    seeded: Client, browser: httpx.Client
) -> None:
    """Every example on the explain page names the providers the API
    (and so ``berth explain``) blames, by name: here the shared disk
    pool as well as the host's own disk for the first eight hosts."""
    query = "resources=DISK_GB:200000"
    api = seeded.get("/berth/explain/allocation_candidates?" + query).json()
    html = page(browser, "/dashboard/explain?" + str(httpx.QueryParams({"q": query})))
    shown = re.findall(r'<div class="example">(.*?)</div>', html, re.S)
    examples = [e for r in api["reasons"] for e in r["examples"]]
    assert len(shown) == len(examples) > 0
    for ex, div in zip(examples, shown, strict=True):
        names = re.findall(
            r'class="provider" data-uuid="([^"]+)" '
            r'title="[^"]+" href="[^"]+">([^<]+)<',
            div,
        )
        assert names[0] == (ex["tree"], ex["tree_name"])
        if ex["providers"] != [ex["tree"]]:
            assert names[1:] == list(zip(ex["providers"], ex["provider_names"], strict=True))
    pooled = [e for e in examples if w.POOL in e["providers"]]
    assert pooled and all("disk-pool" in e["provider_names"] for e in pooled)
