"""Small helpers every handler uses: parse, authorize, reply."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar
from urllib.parse import parse_qsl

import falcon
import jsonschema
import orjson

from berth.api import microversion, render
from berth.api.errors import HTTPProblem
from berth.db.engine import Database
from berth.domain.allocation_candidate.cache import CandidateCache
from berth.domain.errors import DomainError
from berth.domain.memo import Memo


class Validates(Protocol):
    """What the helpers below need of a schema
    (``berth.api.schemas.FastValidator``)."""

    def validate(self, instance: Any) -> None:
        """Raise ``jsonschema.ValidationError`` unless ``instance`` is
        valid."""

    def integral(self, instance: Any) -> Any:
        """A valid ``instance`` with its integral floats turned into
        ints where the schema wants integers."""


def want(req: falcon.Request, minimum: str) -> bool:
    """True when the request's microversion is ``minimum`` ("1.28") or
    later (``microversion.at_least``)."""
    return microversion.at_least(req.context.version, minimum)


def db(req: falcon.Request) -> Database:
    return req.context.state.db  # type: ignore[no-any-return]


def conf(req: falcon.Request) -> Any:
    return req.context.state.conf


def candidate_cache(req: falcon.Request) -> CandidateCache:
    """The application's candidate cache (``State.candidate_cache``)."""
    return req.context.state.candidate_cache  # type: ignore[no-any-return]


def memo(req: falcon.Request, name: str) -> Memo:
    """One of the application's memos (``State.usage_memo``,
    ``State.provider_memo``)."""
    return getattr(req.context.state, name + "_memo")  # type: ignore[no-any-return]


def authorize(req: falcon.Request, rule: str, target: dict[str, str | None] | None = None) -> None:
    """Apply policy ``rule`` to the caller (raises Forbidden)."""
    req.context.state.policy.authorize(req.context.auth, rule, target)


def check_accept(req: falcon.Request) -> None:
    """406 unless the client can take JSON."""
    if not render.accepts_json(req.get_header("accept")):
        raise HTTPProblem(406, "Only application/json is provided")


def _check_depth(data: Any, limit: int) -> None:
    stack = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > limit:
            raise HTTPProblem(400, "Malformed JSON: nested deeper than %d levels" % limit)
        if isinstance(item, dict):
            for key, value in item.items():
                if "\x00" in key:
                    raise HTTPProblem(400, "Malformed JSON: NUL characters are not allowed")
                stack.append((value, depth + 1))
        elif isinstance(item, list):
            stack.extend((value, depth + 1) for value in item)
        elif isinstance(item, str) and "\x00" in item:
            raise HTTPProblem(400, "Malformed JSON: NUL characters are not allowed")


def require_json(req: falcon.Request) -> None:
    """415 unless the body is declared JSON. Handlers that upstream checks
    in this order call it before policy, so the order of errors matches."""
    ctype = (req.content_type or "").split(";")[0].strip().lower()
    if ctype != "application/json":
        raise HTTPProblem(
            415, "The media type %s is not supported, use application/json" % (ctype or "None")
        )


def json_body(req: falcon.Request, schema: Validates) -> Any:
    """The request body, decoded and validated against ``schema``.

    415 for a wrong media type, 400 for malformed JSON (including NaN,
    lone surrogates and excessive nesting) or a schema violation, worded
    as jsonschema words it. Where the schema wants an integer, an
    integral float (``1.0``, ``1e3``, and an integer beyond 64 bits,
    which orjson reads as a float) comes back as an int: jsonschema
    counts them as integers, the database drivers would not.
    """
    require_json(req)
    raw = req.bounded_stream.read()
    try:
        data = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise HTTPProblem(400, "Malformed JSON: %s" % exc) from None
    _check_depth(data, req.context.state.conf.berth.max_json_depth)
    check_body(schema, data)
    return schema.integral(data)


def check_body(schema: Validates, data: Any) -> None:
    """400 "JSON does not validate" with jsonschema's words unless
    ``schema`` accepts ``data``."""
    try:
        schema.validate(data)
    except jsonschema.ValidationError as exc:
        raise HTTPProblem(400, "JSON does not validate: %s" % exc) from None


T = TypeVar("T")


def parse_or_not_found(
    req: falcon.Request, parse: Callable[[], T], exists: Callable[[Any], object]
) -> T:
    """``parse()`` (reading and checking a write's body); when it refuses
    the body, ``exists(conn)`` runs first, so that its 404 (a missing
    provider) comes before the body's 400 or 415, in upstream's order.

    A body that parses costs no read: the write itself answers 404 for a
    missing provider, in the same words.
    """
    try:
        return parse()
    except (HTTPProblem, DomainError):
        db(req).read(exists)
        raise


def query(req: falcon.Request) -> list[tuple[str, str]]:
    """The query string as (key, value) pairs, blanks kept, in order."""
    try:
        return parse_qsl(
            req.query_string, keep_blank_values=True, errors="strict", max_num_fields=1000
        )
    except (UnicodeDecodeError, ValueError) as exc:
        raise HTTPProblem(400, "Invalid query string parameters: %s" % exc) from None


def query_dict(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Last value wins, as upstream validates query strings."""
    return dict(pairs)


def validate_query(req: falcon.Request, schema: Validates) -> list[tuple[str, str]]:
    """Parse and validate the query string; 400 with jsonschema's words."""
    return validate_pairs(query(req), schema)


def validate_pairs(pairs: list[tuple[str, str]], schema: Validates) -> list[tuple[str, str]]:
    """``pairs`` once validated (see ``validate_query``)."""
    try:
        schema.validate(query_dict(pairs))
    except jsonschema.ValidationError as exc:
        raise HTTPProblem(400, "Invalid query string parameters: %s" % exc) from None
    return pairs


#: The second "now" was last written as an HTTP date, and the text: most
#: answers say "modified now", and formatting costs more than the rest
#: of the headers together.
_now: tuple[int, str] = (-1, "")


def _http_date(when: dt.datetime | None) -> str:
    global _now
    if when is None:
        second = int(time.time())
        if _now[0] != second:
            _now = (second, falcon.dt_to_http(dt.datetime.fromtimestamp(second, dt.UTC)))
        return _now[1]
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return falcon.dt_to_http(when)


def cache_headers(req: falcon.Request, resp: falcon.Response, when: dt.datetime | None) -> None:
    """From 1.15, ``last-modified`` (``when``, else now) and
    ``cache-control: no-cache``, with or without a body."""
    if want(req, "1.15"):
        resp.set_header("last-modified", _http_date(when))
        resp.set_header("cache-control", "no-cache")


def send(
    req: falcon.Request,
    resp: falcon.Response,
    data: Any,
    status: int = 200,
    last_modified: dt.datetime | None = None,
    *,
    cache: bool = True,
) -> None:
    """Reply with ``data`` as JSON; from 1.15, with caching headers."""
    resp.status = status
    resp.content_type = render.JSON
    resp.data = render.dumps(data)
    if cache:
        cache_headers(req, resp, last_modified)


def no_content(resp: falcon.Response) -> None:
    resp.status = 204
    resp.data = b""


def newest(times: Iterable[dt.datetime | None]) -> dt.datetime | None:
    """The latest of ``times`` (None when there are none)."""
    found = [t for t in times if t is not None]
    return max(found) if found else None
