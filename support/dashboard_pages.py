"""Reading the dashboard's pages in the tests (test_dashboard*.py):
``page`` (a 200 HTML answer), ``first`` (the "first" page of a query)
and the hosts it lists (``rows``), every page (``PAGES``), and ``api_totals``, what the API says
the pages should sum to."""

from __future__ import annotations

import re
from typing import Any

import httpx

from support import dashboard_world as w

#: Every page, as an operator opens it (the browser tests visit each).
PAGES = (
    "/dashboard",
    "/dashboard/providers",
    "/dashboard/providers?by=aggregate&q=" + w.AGG,
    "/dashboard/consumers",
    "/dashboard/consumers?view=project",
    "/dashboard/explain?q=resources%3DVCPU%3A8%2CMEMORY_MB%3A16384%26required%3DHW_CPU_X86_AVX2",
    "/dashboard/fit?q=resources%3DVCPU%3A4%2CMEMORY_MB%3A4096",
    "/dashboard/first?q=resources%3DVCPU%3A4%26limit%3D20&order=spread"
    "&prefer=COMPUTE_STATUS_DISABLED%3A-10",
)


def page(c: httpx.Client, url: str) -> str:
    resp = c.get(url)
    assert resp.status_code == 200, resp.text
    assert resp.headers["content-type"].startswith("text/html")
    return resp.text


def api_totals(client: httpx.Client, *trees: str) -> dict[str, dict[str, int]]:
    """Capacity and used per class, summed from the API (over the trees
    of the root uuids ``trees``; none: every provider)."""
    totals: dict[str, dict[str, int]] = {}
    rps = [
        rp
        for query in ["?in_tree=" + root for root in trees] or [""]
        for rp in client.get("/resource_providers" + query).json()["resource_providers"]
    ]
    for rp in rps:
        invs = client.get("/resource_providers/%s/inventories" % rp["uuid"]).json()["inventories"]
        used = client.get("/resource_providers/%s/usages" % rp["uuid"]).json()["usages"]
        for rc, inv in invs.items():
            row = totals.setdefault(rc, {"capacity": 0, "used": 0})
            row["capacity"] += int((inv["total"] - inv["reserved"]) * inv["allocation_ratio"])
            row["used"] += used.get(rc, 0)
    return totals


def first(c: httpx.Client, query: str, **form: str) -> str:
    return page(c, "/dashboard/first?" + str(httpx.QueryParams({"q": query, **form})))


def rows(html: str) -> list[dict[str, Any]]:
    """The hosts the page lists, in its order."""
    table = html.split('id="first-hosts"')[1].split("</table>")[0]
    out = []
    for row in re.findall(r'<tr data-uuid="[^"]+".*?</tr>', table, re.S):
        score = re.search(r'class="n score">([-\d.]+)<', row)
        out.append(
            {
                "uuid": re.search(r'data-uuid="([^"]+)"', row).group(1),
                "name": re.search(r'class="provider"[^>]*>([^<]+)<', row).group(1),
                "score": float(score.group(1)) if score else None,
                "free": {
                    m[0]: (int(m[1]), int(m[2]))
                    for m in re.findall(
                        r'class="n free" data-class="([A-Z_]+)" data-value="(-?\d+)"'
                        r' data-capacity="(\d+)"',
                        row,
                    )
                },
                "candidates": int(
                    re.findall(r'<td class="n">([\d,]+)</td>', row)[-1].replace(",", "")
                ),
            }
        )
    return out
