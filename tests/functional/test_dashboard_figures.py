"""What the dashboard's figures and words say (issue 37, list 8): a
capacity, used and free shown together are in one unit and add up as
shown; counts agree with their nouns; an aggregate has the same name on
every page and its row counts the whole trees it lists; explain's
reasons are in words, each with distinct example trees; first hosts in
``spread`` put a disabled host last unless the preferences say
otherwise."""

from __future__ import annotations

import random
import re
from decimal import Decimal

import httpx
import pytest

from berth.api.views.dashboard import REASON_WORDS, figures
from berth.domain.allocation_candidate.faults import KINDS
from berth.domain.dashboard import Amounts
from support import dashboard_world as w
from support.dashboard_pages import api_totals, first, page, rows
from tests.conftest import Client, make_conf

#: A figure as a page shows it: a number and, for a size, its unit.
FIGURE = re.compile(r"^(-?[\d,]+(?:\.\d+)?)(?: ([KMGTPE]iB))?$")


def parse(text: str) -> tuple[Decimal, str]:
    m = FIGURE.match(text)
    assert m, text
    return Decimal(m.group(1).replace(",", "")), m.group(2) or ""


def test_capacity_used_and_free_add_up_in_one_unit() -> None:
    # The cases: 101 TiB of disk with 100 GiB used, and an
    # empty 64 GiB of memory.
    shown = figures(Amounts("DISK_GB", 101 * 1024, 100))
    assert (shown.capacity, shown.used, shown.free) == ("101.0 TiB", "0.1 TiB", "100.9 TiB")
    shown = figures(Amounts("MEMORY_MB", 64 * 1024, 0))
    assert (shown.used, shown.capacity) == ("0 GiB", "64 GiB")
    assert figures(Amounts("VCPU", 3072, 240)).free == "2,832"
    rng = random.Random(37)
    for _ in range(3000):
        rc = rng.choice(("MEMORY_MB", "DISK_GB", "CUSTOM_X_KB", "VCPU"))
        capacity = rng.choice((0, 1, 10, 1000)) + int(10 ** rng.uniform(0, 9))
        used = rng.choice(
            (0, 1, rng.randrange(capacity + 1), capacity, capacity + rng.randrange(1, 99))
        )
        shown = figures(Amounts(rc, capacity, used))
        (cap, unit), (use, u2), (free, u3) = (
            parse(shown.capacity),
            parse(shown.used),
            parse(shown.free),
        )
        assert unit == u2 == u3, shown
        assert use + free == cap, (capacity, used, shown)
        # A use or free amount is never rounded away.
        assert (use == 0) == (used == 0), (capacity, used, shown)
        assert (free == 0) == (used == capacity), (capacity, used, shown)


def test_pages_show_each_pair_in_one_unit(seeded: Client, browser: httpx.Client) -> None:
    for url in ("/dashboard", "/dashboard/providers", "/dashboard/providers?page=2"):
        html = page(browser, url)
        pairs = re.findall(
            r'<span class="nums"><span [^>]*>([^<]+)</span>'
            r" / <span [^>]*>([^<]+)</span>",
            html,
        )
        assert pairs
        for used, capacity in pairs:
            assert parse(used)[1] == parse(capacity)[1], (url, used, capacity)
    html = page(browser, "/dashboard")
    for rc in ("VCPU", "MEMORY_MB", "DISK_GB"):
        row = re.search(r'<tr data-class="%s">(.*?)</tr>' % rc, html, re.S)
        assert row
        texts = dict(
            re.findall(
                r'class="n (capacity|used|free)"[^>]*>'
                r"([^<]+)<",
                row.group(1),
            )
        )
        (cap, unit), (use, u2), (free, u3) = (parse(texts[k]) for k in ("capacity", "used", "free"))
        assert unit == u2 == u3 and use + free == cap, texts


def test_counts_agree_with_their_nouns(seeded: Client, browser: httpx.Client) -> None:
    counts = re.search(
        r'<p class="lead" id="counts"[^>]*>(.*?)</p>', page(browser, "/dashboard"), re.S
    )
    assert counts
    text = re.sub(r"<[^>]+>", "", counts.group(1))
    assert "73 providers in 25 trees, 1 aggregate." in text
    assert "aggregates" not in text
    other = "bbbbbbbb-0000-4000-8000-000000000002"
    gen = seeded.get("/resource_providers/" + w.POOL).json()["generation"]
    assert (
        seeded.put(
            "/resource_providers/%s/aggregates" % w.POOL,
            json={"aggregates": [w.AGG, other], "resource_provider_generation": gen},
        ).status_code
        == 200
    )
    counts = re.search(r'id="counts"[^>]*>(.*?)</p>', page(browser, "/dashboard"), re.S)
    assert counts and "2</span> aggregates." in counts.group(1)
    one = page(browser, "/dashboard/providers?by=uuid&q=" + w.POOL)
    assert "1 provider matches uuid" in one and "in 1 tree." in one


def test_an_aggregate_has_one_name_on_every_page(seeded: Client, browser: httpx.Client) -> None:
    name = "compute-01, compute-02, compute-03 and 6 more"
    overview = page(browser, "/dashboard")
    row = overview.split('data-aggregate="%s"' % w.AGG)[1].split("</tr>")[0]
    assert ">%s</a>" % name in row
    for url in ("/dashboard/providers", "/dashboard/providers?by=aggregate&q=" + w.AGG):
        html = page(browser, url)
        chips = re.findall(
            r'<a class="agg" data-aggregate="([^"]+)" '
            r'title="aggregate \1"[^>]*>([^<]+)</a>',
            html,
        )
        assert chips and set(chips) == {(w.AGG, name)}, url
        assert w.AGG[:8] + "…" not in html
    fit = page(browser, "/dashboard/fit?q=resources%3DVCPU%3A1")
    assert ">%s</a>" % name in fit.split('id="fit-aggregates"')[1]


def test_an_aggregate_row_counts_the_trees_it_lists(seeded: Client, browser: httpx.Client) -> None:
    """Hosts 1 to 8 (their roots in the aggregate, VCPU and memory on
    their NUMA children) and the disk pool."""
    want = api_totals(seeded, *[w.rp_uuid(h) for h in range(1, 9)], w.POOL)
    assert want["VCPU"]["capacity"] == 8 * 2 * 64
    html = page(browser, "/dashboard")
    row = html.split('data-aggregate="%s"' % w.AGG)[1].split("</tr>")[0]
    assert re.search(r'class="n trees"[^>]*>9<', row)
    shown: dict[str, dict[str, int]] = {
        rc: {} for rc in re.findall(r'class="rc" data-class="(\w+)"', row)
    }
    for kind, rc, n in re.findall(
        r'class="n (used|capacity)" '
        r'data-class="(\w+)" data-value="(\d+)"',
        row,
    ):
        shown[rc][kind] = int(n)
    assert shown == want


def test_explain_says_reasons_in_words_with_distinct_trees(
    seeded: Client, browser: httpx.Client
) -> None:
    assert set(REASON_WORDS) == set(KINDS)
    # Every tree lacks room for both classes: two capacity faults each.
    query = "resources=VCPU:500,MEMORY_MB:500000"
    api = seeded.get("/berth/explain/allocation_candidates?" + query).json()
    examples = next(r for r in api["reasons"] if r["reason"] == "capacity")["examples"]
    # One example a tree, in the API as on the page.
    assert len({ex["tree"] for ex in examples}) == len(examples) > 1
    html = page(browser, "/dashboard/explain?" + str(httpx.QueryParams({"q": query})))
    row = html.split('data-reason="capacity"')[1].split("</tr>")[0]
    assert ">not enough free capacity<" in row
    trees = re.findall(
        r'<span class="tree-ref"><a class="provider" '
        r'data-uuid="([^"]+)"',
        row,
    )
    assert len(trees) > 1 and len(trees) == len(set(trees))
    html = page(browser, "/dashboard/explain?q=resources%3DVGPU%3A1")
    row = html.split('data-reason="no_inventory"')[1].split("</tr>")[0]
    assert '<td class="reason">no inventory of the class<' in row


def test_spread_lists_a_disabled_host_last_unless_overridden(
    seeded: Client, browser: httpx.Client
) -> None:
    """Host 4 is loaded as hosts 1 to 6 are, and disabled."""

    def scores(**form: str) -> tuple[list[str], dict[str, float]]:
        shown = rows(first(browser, "resources=VCPU:1", order="spread", **form))
        return ([r["name"] for r in shown], {r["name"]: r["score"] for r in shown})

    disabled = "compute-%02d" % w.DISABLED
    order, score = scores()
    assert order[-1] == disabled
    assert score[disabled] == pytest.approx(score["compute-05"] - 10)
    # Other preferences typed in the form replace the configured ones.
    order, score = scores(prefer="CUSTOM_NONE:1")
    assert score[disabled] == pytest.approx(score["compute-05"])
    assert make_conf().berth.candidate_order_preferences == {"COMPUTE_STATUS_DISABLED": -10.0}
