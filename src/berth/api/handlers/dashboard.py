"""``/dashboard...``: the read-only web view of the cloud (see
``docs/dashboard.md``). Server-rendered HTML (Jinja2 templates in
``berth/api/templates``), no asset from the network.

A browser (which asks for HTML) that the dashboard refuses gets an HTML
page in the dashboard's look (:func:`error_page`, called by the app's
one error handler) with the status and one line; an API client asking
for JSON gets the Placement JSON error as anywhere else.

Every page is tagged with the change sequence number it shows (``ETag``);
a browser revalidating a page whose sequence did not move gets a 304 for
the price of one small query. ``/dashboard/seq`` answers just the number,
which the pages poll to reload themselves when the cloud changes.
"""

from __future__ import annotations

from functools import cache
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl, urlencode

import falcon
import jinja2
from sqlalchemy.engine import Connection

from berth.api import errors, microversion, render, util
from berth.api.errors import STATUS_TEXT, HTTPProblem
from berth.api.schemas import allocation_candidate as candidate_schema
from berth.api.schemas.allocation_candidate import parse_query
from berth.api.views import explain as explain_view
from berth.api.views import fit as fit_view
from berth.db import changes
from berth.domain import dashboard
from berth.domain.allocation_candidate import engine, explain, fit
from berth.domain.errors import DomainError

RULE = "berth:dashboard"
HTML = "text/html; charset=utf-8"
#: The static files there are, with their types.
#: Not routed: what api/app.py's one error handler calls, so that a browser
#: asking a dashboard page gets an HTML error page.
APP_HOOKS = ("wants_page", "error_page")
STATIC = {"dashboard.css": "text/css; charset=utf-8"}
#: Binary units of the size classes (MEMORY_MB, DISK_GB, CUSTOM_..._MB),
#: from the one the class counts in.
UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
_SIZE_STEP = {u[0] + "B": step for step, u in enumerate(UNITS)}


@cache
def _templates() -> jinja2.Environment:
    """The templates shipped in the package (read once, immutable)."""
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("berth.api", "templates"),
        autoescape=True, trim_blocks=True, lstrip_blocks=True,
        undefined=jinja2.StrictUndefined)
    env.filters["num"] = lambda n: f"{n:,}"
    env.filters["amount"] = _amount
    env.globals["unit"] = _unit
    env.globals["pager"] = _pager_links
    return env


def _unit(resource_class: str) -> str:
    """The unit ``resource_class`` counts in: "MB", "GB"... for a size
    class, "" for a count."""
    tail = resource_class.rpartition("_")[2]
    return tail if tail in _SIZE_STEP else ""


def _amount(n: int, resource_class: str) -> str:
    """``n`` of ``resource_class`` for people: a size in the largest
    binary unit it reaches (``2.49 TiB`` for 2,613,248 MEMORY_MB), a
    count with thousands separators."""
    base = _unit(resource_class)
    if not base:
        return f"{n:,}"
    step = _SIZE_STEP[base]
    size = float(abs(n))
    while size >= 1024 and step < len(UNITS) - 1:
        size /= 1024
        step += 1
    places = 0 if size >= 100 or size == int(size) else (
        1 if size >= 10 else 2)
    text = f"{size:,.{places}f}"
    if places:
        text = text.rstrip("0").rstrip(".")
    return "%s%s %s" % ("-" if n < 0 else "", text, UNITS[step])


def _pager_links(page: dashboard.Page, args: dict[str, str]
                 ) -> list[tuple[str, str | None]]:
    """(label, href or None) for first / previous / next / last."""
    def href(n: int) -> str:
        return "?" + urlencode({**args, "page": str(n)})
    n, last = page.number, page.pages
    return [("« first", href(1) if n > 1 else None),
            ("‹ previous", href(n - 1) if n > 1 else None),
            ("next ›", href(n + 1) if n < last else None),
            ("last »", href(last) if n < last else None)]


def _begin(req: falcon.Request) -> None:
    """Authorize, and read queries at the newest microversion (a browser
    sends no microversion header)."""
    util.authorize(req, RULE)
    req.context.version = microversion.MAX


def _params(req: falcon.Request) -> dict[str, str]:
    return util.query_dict(util.query(req))


def _page_number(params: dict[str, str]) -> int:
    text = params.get("page", "1")
    if not text.isdigit() or len(text) > 9:
        raise HTTPProblem(400, "page must be a positive integer")
    return int(text)


def _choice(params: dict[str, str], key: str, allowed: tuple[str, ...]
            ) -> str:
    value = params.get(key, allowed[0])
    if value not in allowed:
        raise HTTPProblem(400, "%s must be one of %s"
                          % (key, ", ".join(allowed)))
    return value


def _seq(conn: Connection) -> int:
    """The change sequence as one number: writes numbered so far over
    every counter slot (Galera nodes each keep one), so any write moves
    it."""
    return changes.current(conn).total


def _not_modified(req: falcon.Request, resp: falcon.Response,
                  seq: int) -> bool:
    """Tag the answer with ``seq``; True (and a 304) when the browser
    already has it."""
    tag = '"seq-%d"' % seq
    resp.set_header("etag", tag)
    resp.set_header("cache-control", "no-cache")
    if req.get_header("if-none-match") == tag:
        resp.status = 304
        resp.data = b""
        return True
    return False


def _render(resp: falcon.Response, template: str, **context: Any) -> None:
    resp.status = 200
    resp.content_type = HTML
    resp.data = _templates().get_template(template).render(
        **context).encode()


def _page(req: falcon.Request, resp: falcon.Response, template: str,
          build: Any, **context: Any) -> None:
    """Answer ``template`` with what ``build(conn, snapshot)`` returns,
    or a 304 when the sequence number did not move."""
    cache_ = util.world_cache(req)

    def work(conn: Connection) -> tuple[int, Any]:
        seq = _seq(conn)
        if req.get_header("if-none-match") == '"seq-%d"' % seq:
            return seq, None
        return seq, build(conn, cache_.current(conn))

    seq, data = util.db(req).read(work)
    if _not_modified(req, resp, seq) or data is None:
        return
    _render(resp, template, seq=seq, data=data, **context)


def overview(req: falcon.Request, resp: falcon.Response) -> None:
    """GET /dashboard: 200 (or 304 when unchanged); 400 bad page; 403."""
    _begin(req)
    params = _params(req)
    number = _page_number(params)
    _page(req, resp, "overview.html",
          lambda conn, snap: dashboard.overview(conn, snap.world, number),
          active="overview", args={})


def providers(req: falcon.Request, resp: falcon.Response) -> None:
    """GET /dashboard/providers?by=&q=&page=: 200 (or 304); 400 bad
    parameter; 403."""
    _begin(req)
    params = _params(req)
    number = _page_number(params)
    by = _choice(params, "by", dashboard.SEARCH_BY)
    text = params.get("q", "")
    _page(req, resp, "providers.html",
          lambda conn, snap: dashboard.trees(conn, snap.world, by, text,
                                             number),
          active="providers", by=by, q=text, kinds=dashboard.SEARCH_BY,
          args={"by": by, "q": text})


def consumers(req: falcon.Request, resp: falcon.Response) -> None:
    """GET /dashboard/consumers?view=&page=: 200 (or 304); 400 bad
    parameter; 403."""
    _begin(req)
    params = _params(req)
    number = _page_number(params)
    view = _choice(params, "view", dashboard.CONSUMER_VIEWS)
    _page(req, resp, "consumers.html",
          lambda conn, _snap: dashboard.consumers(conn, view, number),
          active="consumers", view=view, views=dashboard.CONSUMER_VIEWS,
          args={"view": view})


def _query_pairs(text: str) -> list[tuple[str, str]]:
    return parse_qsl(text.strip().lstrip("?"), keep_blank_values=True)


def _one_line(problem: HTTPProblem, method: str = "") -> str:
    """What ``problem`` says, in one line for people (no schema dump)."""
    detail = problem.to_dict(None, False, method)["errors"][0]["detail"]
    return errors.for_people(detail, known=candidate_schema.QUERY_NAMES)


def _parse(text: str, version: tuple[int, int]) -> Any:
    """The request groups and request-wide parameters of the query
    ``text``, or the one line that says why the API would refuse it."""
    try:
        return parse_query(_query_pairs(text), version)
    except HTTPProblem as exc:
        return _one_line(exc)
    except DomainError as exc:
        return _one_line(errors.from_domain(exc))


def _tool(req: falcon.Request, resp: falcon.Response, template: str,
          run: Any) -> None:
    """An explain or fit page: the form, and for a query the report (a
    query the API would refuse shows why, in one line, instead)."""
    _begin(req)
    text = _params(req).get("q", "").strip()
    parsed = _parse(text, req.context.version) if text else None
    cache_ = util.world_cache(req)

    def work(conn: Connection) -> tuple[int, Any]:
        seq = _seq(conn)
        if not isinstance(parsed, tuple) or req.get_header(
                "if-none-match") == '"seq-%d"' % seq:
            return seq, parsed
        groups, wide = parsed
        try:  # e.g. an unknown resource class
            world, specs = engine.resolve(conn, cache_, groups, wide)
        except DomainError as exc:
            return seq, _one_line(errors.from_domain(exc))
        report = run(world, groups, specs, wide)
        return seq, (report, dashboard.labels(
            conn, world, _uuids(report), (a["aggregate"] for a in
                                          report.get("aggregates", ()))))

    seq, outcome = util.db(req).read(work)
    error = outcome if isinstance(outcome, str) else None
    if error is None and _not_modified(req, resp, seq):
        return
    report, labels = (outcome if isinstance(outcome, tuple)
                      else (None, dashboard.Labels({}, {})))
    resp.set_header("cache-control", "no-cache")
    _render(resp, template, seq=seq, q=text, error=error, report=report,
            named=labels.names, members=labels.members,
            active=template.split(".")[0], args={})


def _uuids(report: dict[str, Any]) -> set[str]:
    """The provider uuids an explain or fit report names (the pages show
    their names)."""
    found = {tree["root_provider_uuid"] for tree in report.get("trees", ())
             if isinstance(tree, dict)}
    for reason in report.get("reasons", ()):
        for example in reason["examples"]:
            found.update(p for p in (example["tree"],
                                     *example.get("providers", ()))
                         if isinstance(p, str))
    return found


def explain_page(req: falcon.Request, resp: falcon.Response) -> None:
    """GET /dashboard/explain?q=<allocation-candidates query>: 200 (a
    refused query shows why in the page); 403."""
    _tool(req, resp, "explain.html",
          lambda world, groups, specs, wide: explain_view.serialize(
              explain.explain(world, groups, specs, wide)))


def fit_page(req: falcon.Request, resp: falcon.Response) -> None:
    """GET /dashboard/fit?q=<allocation-candidates query>: 200 (a refused
    query shows why in the page); 403."""
    _tool(req, resp, "fit.html",
          lambda world, groups, specs, wide: fit_view.serialize(
              world, fit.fit(world, specs, wide)))


def wants_page(req: falcon.Request) -> bool:
    """Whether an error answering ``req`` is a page for a browser: a
    dashboard page (not its number or its files) asked for as HTML."""
    path = req.path
    return ((path == "/dashboard" or path.startswith("/dashboard/"))
            and not path.startswith(("/dashboard/seq", "/dashboard/static/"))
            and render.error_media(req.get_header("accept")) == "text/html")


def error_page(req: falcon.Request, resp: falcon.Response,
               problem: HTTPProblem) -> None:
    """Answer ``problem`` as an HTML page in the dashboard's look: its
    status and one line."""
    resp.status = problem.status
    resp.content_type = HTML
    for key, value in problem.headers.items():
        resp.set_header(key, value)
    if problem.status == 404 and not problem.detail:
        line = "There is no dashboard page at %s." % req.path
    else:
        line = _one_line(problem, req.method)
    resp.data = _templates().get_template("error.html").render(
        seq=None, active="", status=problem.status, line=line,
        title=STATUS_TEXT.get(problem.status, ("Error", ""))[0],
        request_id=req.context.get("request_id")).encode()


def sequence(req: falcon.Request, resp: falcon.Response) -> None:
    """GET /dashboard/seq: the change sequence number as text; 200, 403."""
    util.authorize(req, RULE)
    resp.status = 200
    resp.content_type = "text/plain; charset=utf-8"
    resp.set_header("cache-control", "no-store")
    resp.data = str(util.db(req).read(_seq)).encode()


def static(req: falcon.Request, resp: falcon.Response, name: str) -> None:
    """GET /dashboard/static/{name}: a file shipped in the package; 200,
    404 for any other name."""
    kind = STATIC.get(name)
    if kind is None:
        raise HTTPProblem(404, "No dashboard file %s" % name)
    resp.status = 200
    resp.content_type = kind
    resp.set_header("cache-control", "max-age=3600")
    resp.data = resources.files("berth.api").joinpath(
        "static", name).read_bytes()
