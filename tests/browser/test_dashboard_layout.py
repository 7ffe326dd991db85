"""The dashboard's layout at 800 and 1280 px, measured in the browser: no
usage figure overlaps its bar (nor the class name), and the query
forms' fields show their whole placeholder."""

from __future__ import annotations

from support.dashboard_pages import PAGES
from tests.browser.conftest import Page

#: Each class row of a compact usage block (name, bar, "used / capacity")
#: whose parts overlap: the text as laid out (a Range's box, which an
#: overflowing text sticks out of), not the boxes the grid gives.
OVERLAPS = """() => {
  const out = [];
  const text = el => {
    const r = document.createRange();
    r.selectNodeContents(el);
    return r.getBoundingClientRect();
  };
  for (const rc of document.querySelectorAll(".compact .rc")) {
    const name = text(rc.querySelector(".rcname"));
    const bar = rc.querySelector(".bar").getBoundingClientRect();
    const nums = text(rc.querySelector(".nums"));
    const cell = rc.getBoundingClientRect();
    const what = rc.dataset.class + " " + rc.querySelector(".nums").textContent;
    if (bar.width < 16) { out.push(what + ": bar " + bar.width + " px"); }
    const sameLine = (a, b) => a.top < b.bottom && b.top < a.bottom;
    if (sameLine(nums, bar) && nums.left < bar.right + 4 && nums.right > bar.left) {
      out.push(what + ": figures over the bar");
    }
    if (sameLine(name, bar) && bar.left < name.right) {
      out.push(what + ": bar over the class name");
    }
    if (nums.right > cell.right + 1 || nums.left < cell.left - 1) {
      out.push(what + ": figures outside their row");
    }
  }
  return out;
}"""

#: Fields whose placeholder does not fit (shown as typed text, which
#: scrolls in a field too narrow for it).
CLIPPED = """() => {
  const out = [];
  for (const el of document.querySelectorAll("input[placeholder]")) {
    const typed = el.value;
    el.value = el.placeholder;
    if (el.scrollWidth > el.clientWidth) {
      out.push(el.id + ": " + el.scrollWidth + " > " + el.clientWidth);
    }
    el.value = typed;
  }
  return out;
}"""


def test_no_figure_overlaps_its_bar(sized: Page) -> None:
    seen = 0
    for path in PAGES:
        page = sized.go(path)
        seen += page.locator(".compact .rc").count()
        assert page.evaluate(OVERLAPS) == [], path
    assert seen > 100


def test_form_fields_show_their_placeholder(sized: Page) -> None:
    for path in ("/dashboard/first", "/dashboard/explain", "/dashboard/providers"):
        page = sized.go(path)
        assert page.evaluate(CLIPPED) == [], path
    page = sized.go("/dashboard/first")
    assert page.get_attribute("#prefer", "placeholder") == "COMPUTE_STATUS_DISABLED:-10"
