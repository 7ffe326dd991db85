"""How the dashboard's pages are made: the templates shipped in the
package (with the words of ``berth.api.views.dashboard`` as filters and
globals), the change feed's kinds that change each part of a page
(:data:`LIVE`), and where in the change sequence a page was built
(:class:`At`: its ``ETag`` and the feed position its script reads on
from)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any
from urllib.parse import urlencode

import falcon
import jinja2
from sqlalchemy.engine import Connection

from berth.api.views import dashboard as view
from berth.db import changes, events
from berth.domain import dashboard

HTML = "text/html; charset=utf-8"

_TREES = (events.PROVIDER_CREATED, events.PROVIDER_UPDATED, events.PROVIDER_DELETED)
_USE = (events.INVENTORIES_SET, *events.ALLOCATION_KINDS)
#: The change feed's kinds that change each part of a page (its
#: ``data-live`` attribute; "" for any kind): live refresh re-renders a
#: part when events of its kinds arrive (``resync`` re-renders all).
LIVE = {
    name: ",".join(kinds)
    for name, kinds in {
        "counts": (*_TREES, events.AGGREGATES_SET),
        "capacity": (*_TREES, *_USE),
        "fullest": (*_TREES, *_USE, events.TRAITS_SET),
        "aggregates": (*_TREES, *_USE, events.AGGREGATES_SET),
        "trees": (*_TREES, *_USE, events.TRAITS_SET, events.AGGREGATES_SET),
        "consumers": events.ALLOCATION_KINDS,
        # A query's answer: any change (a trait created makes it valid).
        "query": (),
    }.items()
}


@cache
def templates() -> jinja2.Environment:
    """The templates shipped in the package (read once, immutable)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("berth.api", "templates"),
        autoescape=True,
        trim_blocks=True,
        lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    env.filters["num"] = lambda n: f"{n:,}"
    env.filters["amount"] = view.amount
    env.filters["noun"] = view.noun
    env.globals["unit"] = view.unit
    env.globals["figures"] = view.figures
    env.globals["reason_words"] = view.REASON_WORDS
    env.globals["pager"] = pager_links
    env.globals["live"] = LIVE
    return env


def pager_links(page: dashboard.Page, args: dict[str, str]) -> list[tuple[str, str | None]]:
    """(label, href or None) for first / previous / next / last."""

    def href(n: int) -> str:
        return "?" + urlencode({**args, "page": str(n)})

    n, last = page.number, page.pages
    return [
        ("« first", href(1) if n > 1 else None),
        ("‹ previous", href(n - 1) if n > 1 else None),
        ("next ›", href(n + 1) if n < last else None),
        ("last »", href(last) if n < last else None),
    ]


@dataclass(frozen=True)
class At:
    """Where in the change sequence a page was built: the number of
    writes over every counter slot (Galera nodes each keep one, so any
    write moves it: the ``ETag`` and ``/dashboard/seq``), and the feed
    position (read in the page's own transaction, so the page reflects
    at least every write up to it)."""

    seq: int
    position: str

    @property
    def tag(self) -> str:
        return '"seq-%d"' % self.seq


def built_at(conn: Connection) -> At:
    """Where in the change sequence ``conn``'s transaction reads."""
    now = changes.current(conn)
    return At(now.total, str(now))


def not_modified(req: falcon.Request, resp: falcon.Response, at: At) -> bool:
    """Tag the answer with ``at``; True (and a 304) when the browser
    already has it."""
    resp.set_header("etag", at.tag)
    resp.set_header("cache-control", "no-cache")
    if req.get_header("if-none-match") == at.tag:
        resp.status = 304
        resp.data = b""
        return True
    return False


def render(resp: falcon.Response, template: str, at: At, **context: Any) -> None:
    resp.status = 200
    resp.content_type = HTML
    resp.data = (
        templates()
        .get_template(template)
        .render(seq=at.seq, position=at.position, **context)
        .encode()
    )
