"""``/dashboard...``: the read-only web view of the cloud (see
``docs/dashboard.md``). Server-rendered HTML (Jinja2 templates in
``berth/api/templates``), no asset from the network.

A browser (which asks for HTML) that the dashboard refuses gets an HTML
page in the dashboard's look (:func:`error_page`, called by the app's
one error handler) with the status and one line; an API client asking
for JSON gets the Placement JSON error as anywhere else.

Every page is tagged with the change sequence number it shows (``ETag``);
a browser revalidating a page whose sequence did not move gets a 304 for
the price of one small query. Each page also carries the change feed's
position it reflects and marks the parts of it that events change
(``data-live``: the kinds of ``berth.api.views.dashboard_page.LIVE``);
its script reads the feed after that position (``/dashboard/changes``,
the feed's own handler) and re-renders those parts when events of their
kinds arrive, or, for a caller the feed refuses, polls ``/dashboard/seq``
(just the number).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import replace
from importlib import resources
from typing import Any
from urllib.parse import parse_qsl

import falcon
from sqlalchemy.engine import Connection

from berth.api import errors, microversion, render, util
from berth.api.errors import STATUS_TEXT, HTTPProblem
from berth.api.schemas import allocation_candidate as candidate_schema
from berth.api.schemas.allocation_candidate import parse_query
from berth.api.views import dashboard_page as pages
from berth.api.views import explain as explain_view
from berth.api.views import fit as fit_view
from berth.domain import dashboard, dashboard_consumers
from berth.domain.allocation_candidate import engine, explain, fit
from berth.domain.allocation_candidate.request import NAMES
from berth.domain.errors import DomainError

POLICY = "berth:dashboard"
#: Not routed: what api/app.py's one error handler calls, so that a browser
#: asking a dashboard page gets an HTML error page.
APP_HOOKS = ("wants_page", "error_page")
#: The static files there are, with their types.
STATIC = {"dashboard.css": "text/css; charset=utf-8"}

#: Candidates the first-hosts page asks for when its query names no
#: ``limit`` (the whole answer of a large cloud is no page to read).
FIRST_LIMIT = 50


def _begin(req: falcon.Request) -> None:
    """Authorize, and read queries at the newest microversion (a browser
    sends no microversion header)."""
    util.authorize(req, POLICY)
    req.context.version = microversion.MAX


def _params(req: falcon.Request) -> dict[str, str]:
    return util.query_dict(util.query(req))


def _page_number(params: dict[str, str]) -> int:
    text = params.get("page", "1")
    if not text.isdigit() or len(text) > 9:
        raise HTTPProblem(400, "page must be a positive integer")
    return int(text)


def _choice(params: dict[str, str], key: str, allowed: tuple[str, ...]) -> str:
    value = params.get(key, allowed[0])
    if value not in allowed:
        raise HTTPProblem(400, "%s must be one of %s" % (key, ", ".join(allowed)))
    return value


def _page(
    req: falcon.Request, resp: falcon.Response, template: str, build: Any, **context: Any
) -> None:
    """Answer ``template`` with what ``build(conn, snapshot)`` returns,
    or a 304 when the sequence number did not move."""
    cache_ = util.candidate_cache(req)

    def work(conn: Connection) -> tuple[pages.At, Any]:
        at = pages.built_at(conn)
        if req.get_header("if-none-match") == at.tag:
            return at, None
        return at, build(conn, cache_.current(conn))

    at, data = util.db(req).read(work)
    if pages.not_modified(req, resp, at) or data is None:
        return
    pages.render(resp, template, at, data=data, **context)


def overview(req: falcon.Request, resp: falcon.Response) -> None:
    """GET /dashboard: 200 (or 304 when unchanged); 400 bad page; 403."""
    _begin(req)
    params = _params(req)
    number = _page_number(params)
    _page(
        req,
        resp,
        "overview.html",
        lambda conn, snap: dashboard.overview(conn, snap.world, number),
        active="overview",
        args={},
    )


def providers(req: falcon.Request, resp: falcon.Response) -> None:
    """GET /dashboard/providers?by=&q=&page=: 200 (or 304); 400 bad
    parameter; 403."""
    _begin(req)
    params = _params(req)
    number = _page_number(params)
    by = _choice(params, "by", dashboard.SEARCH_BY)
    text = params.get("q", "")
    _page(
        req,
        resp,
        "providers.html",
        lambda conn, snap: dashboard.trees(conn, snap.world, by, text, number),
        active="providers",
        by=by,
        q=text,
        kinds=dashboard.SEARCH_BY,
        args={"by": by, "q": text},
    )


def consumers(req: falcon.Request, resp: falcon.Response) -> None:
    """GET /dashboard/consumers?view=&page=: 200 (or 304); 400 bad
    parameter; 403."""
    _begin(req)
    params = _params(req)
    number = _page_number(params)
    view = _choice(params, "view", dashboard_consumers.CONSUMER_VIEWS)
    _page(
        req,
        resp,
        "consumers.html",
        lambda conn, _snap: dashboard_consumers.consumers(conn, view, number),
        active="consumers",
        view=view,
        views=dashboard_consumers.CONSUMER_VIEWS,
        args={"view": view},
    )


def _query_pairs(text: str) -> list[tuple[str, str]]:
    return parse_qsl(text.strip().lstrip("?"), keep_blank_values=True)


def _one_line(problem: HTTPProblem, method: str = "", names: Iterable[str] = ()) -> str:
    """What ``problem`` says, in one line for people (no schema dump; an
    unknown class or trait with the nearest of ``names``)."""
    detail = problem.to_dict(None, with_code=False, method=method)["errors"][0]["detail"]
    return errors.for_people(detail, known=candidate_schema.QUERY_NAMES, names=names)


def _refusal(exc: Exception, names: Iterable[str] = ()) -> str:
    """Why the API would refuse a query, in one line: ``exc`` is the
    HTTPProblem or DomainError it would answer; ``names``, the known
    classes and traits."""
    if isinstance(exc, DomainError):
        exc = errors.from_domain(exc)
    assert isinstance(exc, HTTPProblem)
    return _one_line(exc, names=names)


def _parse(text: str, version: tuple[int, int]) -> Any:
    """The request groups and request-wide parameters of the query
    ``text``, or the one line that says why the API would refuse it."""
    try:
        return parse_query(_query_pairs(text), version)
    except (HTTPProblem, DomainError) as exc:
        return _refusal(exc)


def _tool(
    req: falcon.Request, resp: falcon.Response, template: str, parsed: Any, run: Any, **context: Any
) -> None:
    """A query page (explain, fit, first hosts): the form, and for a
    query (``parsed``: a tuple, or the line saying why the API would
    refuse it) the report and labels ``run(conn, parsed)`` gives (a
    refusal, e.g. an unknown resource class, shows in one line
    instead)."""

    def work(conn: Connection) -> tuple[pages.At, Any]:
        at = pages.built_at(conn)
        if not isinstance(parsed, tuple) or req.get_header("if-none-match") == at.tag:
            return at, parsed
        try:
            return at, run(conn, parsed)
        except DomainError as exc:
            return at, _refusal(exc, dashboard.class_and_trait_names(conn))

    at, outcome = util.db(req).read(work)
    error = outcome if isinstance(outcome, str) else None
    if error is None and pages.not_modified(req, resp, at):
        return
    report, labels = outcome if isinstance(outcome, tuple) else (None, dashboard.Labels({}, {}))
    resp.set_header("cache-control", "no-cache")
    pages.render(
        resp,
        template,
        at,
        error=error,
        report=report,
        named=labels.names,
        aggregates=labels.aggregates,
        active=template.split(".")[0],
        args={},
        **context,
    )


def _explained(req: falcon.Request, make: Any) -> Any:
    """``run`` for ``_tool`` of explain or fit: the report ``make(world,
    groups, specs, wide)`` gives, and its providers' labels."""
    cache_ = util.candidate_cache(req)

    def run(conn: Connection, parsed: Any) -> Any:
        groups, wide = parsed
        world, specs = engine.resolve(conn, cache_, groups, wide)
        report = make(world, groups, specs, wide)
        return report, dashboard.labels(
            conn, world, _uuids(report), (a["aggregate"] for a in report.get("aggregates", ()))
        )

    return run


def _uuids(report: dict[str, Any]) -> set[str]:
    """The provider uuids an explain or fit report names (the pages show
    their names)."""
    found = {
        tree["root_provider_uuid"] for tree in report.get("trees", ()) if isinstance(tree, dict)
    }
    for reason in report.get("reasons", ()):
        for example in reason["examples"]:
            found.update(
                p for p in (example["tree"], *example.get("providers", ())) if isinstance(p, str)
            )
    return found


def _query_text(req: falcon.Request) -> str:
    _begin(req)
    return _params(req).get("q", "").strip()


def explain_page(req: falcon.Request, resp: falcon.Response) -> None:
    """GET /dashboard/explain?q=<allocation-candidates query>: 200 (a
    refused query shows why in the page); 403."""
    text = _query_text(req)
    _tool(
        req,
        resp,
        "explain.html",
        _parse(text, req.context.version) if text else None,
        _explained(
            req,
            lambda world, groups, specs, wide: explain_view.serialize(
                explain.explain(world, groups, specs, wide)
            ),
        ),
        q=text,
    )


def fit_page(req: falcon.Request, resp: falcon.Response) -> None:
    """GET /dashboard/fit?q=<allocation-candidates query>: 200 (a refused
    query shows why in the page); 403."""
    text = _query_text(req)
    _tool(
        req,
        resp,
        "fit.html",
        _parse(text, req.context.version) if text else None,
        _explained(
            req,
            lambda world, groups, specs, wide: fit_view.serialize(
                world, fit.fit(world, specs, wide)
            ),
        ),
        q=text,
    )


#: The first-hosts form's order fields (those of GET
#: /berth/allocation_candidates).
ORDER_FIELDS = ("order", "weights", "prefer")


def _ordered_query(req: falcon.Request, text: str, form: dict[str, str]) -> Any:
    """The query ``text`` with the form's order fields, read as GET
    /berth/allocation_candidates reads its query string: (groups, wide
    with a limit, order), or the one line saying why it would refuse it.
    A query that names no ``limit`` gets ``FIRST_LIMIT``."""
    for key, example in (
        ("weights", "VCPU:1,MEMORY_MB:2"),
        ("prefer", "COMPUTE_STATUS_DISABLED:-10"),
    ):
        # Said in the form's words, not as the schema's pattern.
        if form.get(key) and not re.fullmatch(
            candidate_schema.ORDER_PROPERTIES[key]["pattern"], form[key]
        ):
            return "%s: %r is not NAME:weight pairs, comma-separated (e.g. %s)" % (
                key,
                form[key],
                example,
            )
    pairs = _query_pairs(text) + [(k, v) for k, v in form.items() if v]
    try:
        rest, given = candidate_schema.split_order(pairs)
        want = candidate_schema.requested_order(util.conf(req), given)
        groups, wide = parse_query(rest, req.context.version)
    except (HTTPProblem, DomainError) as exc:
        return _refusal(exc)
    if wide.limit is None:
        wide = replace(wide, limit=FIRST_LIMIT)
    return groups, wide, want


def first_page(req: falcon.Request, resp: falcon.Response) -> None:
    """GET /dashboard/first?q=<allocation-candidates query>&order=
    &weights=&prefer=: the hosts the query gets first in that order
    (default: the configured one), as GET /berth/allocation_candidates
    answers it; 200 (a refused query or order shows why in the page;
    304 when the sequence did not move); 403."""
    text = _query_text(req)
    params = _params(req)
    form = {k: params.get(k, "").strip() for k in ORDER_FIELDS}
    conf = util.conf(req)
    cache_ = util.candidate_cache(req)

    def run(conn: Connection, parsed: Any) -> Any:
        groups, wide, want = parsed
        # The API's own search (GET /berth/allocation_candidates).
        result = engine.find_candidates(
            conn, cache_, groups, wide, candidate_schema.candidate_settings(conf, want)
        )
        return {
            "order": want,
            "limit": wide.limit,
            "cut": result.cut,
            "count": len(result.candidates),
            "hosts": dashboard.first_hosts(conn, result.world, result.candidates, want),
        }, dashboard.Labels({}, {})

    _tool(
        req,
        resp,
        "first.html",
        _ordered_query(req, text, form) if text else None,
        run,
        q=text,
        form=form,
        orders=NAMES,
        configured=candidate_schema.requested_order(conf, {}).name,
    )


def wants_page(req: falcon.Request) -> bool:
    """Whether an error answering ``req`` is a page for a browser: a
    dashboard page (not its number or its files) asked for as HTML."""
    path = req.path
    return (
        (path == "/dashboard" or path.startswith("/dashboard/"))
        and not path.startswith(("/dashboard/seq", "/dashboard/changes", "/dashboard/static/"))
        and render.error_media(req.get_header("accept")) == "text/html"
    )


def error_page(req: falcon.Request, resp: falcon.Response, problem: HTTPProblem) -> None:
    """Answer ``problem`` as an HTML page in the dashboard's look: its
    status and one line."""
    resp.status = problem.status
    resp.content_type = pages.HTML
    for key, value in problem.headers.items():
        resp.set_header(key, value)
    if problem.status == 404 and not problem.detail:
        line = "There is no dashboard page at %s." % req.path
    else:
        line = _one_line(problem, req.method)
    resp.data = (
        pages.templates()
        .get_template("error.html")
        .render(
            seq=None,
            active="",
            status=problem.status,
            line=line,
            title=STATUS_TEXT.get(problem.status, ("Error", ""))[0],
            request_id=req.context.get("request_id"),
        )
        .encode()
    )


def sequence(req: falcon.Request, resp: falcon.Response) -> None:
    """GET /dashboard/seq: the change sequence number as text; 200, 403."""
    util.authorize(req, POLICY)
    resp.status = 200
    resp.content_type = "text/plain; charset=utf-8"
    resp.set_header("cache-control", "no-store")
    resp.data = str(util.db(req).read(pages.built_at).seq).encode()


def static(req: falcon.Request, resp: falcon.Response, name: str) -> None:
    """GET /dashboard/static/{name}: a file shipped in the package; 200,
    404 for any other name."""
    kind = STATIC.get(name)
    if kind is None:
        raise HTTPProblem(404, "No dashboard file %s" % name)
    resp.status = 200
    resp.content_type = kind
    resp.set_header("cache-control", "max-age=3600")
    resp.data = resources.files("berth.api").joinpath("static", name).read_bytes()
