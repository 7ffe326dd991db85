"""Response rendering: JSON bodies and the single error serializer."""

from __future__ import annotations

import html
from collections.abc import Callable, Iterable
from typing import Any

import falcon
import orjson

from berth.api.errors import STATUS_TEXT, HTTPProblem

JSON = "application/json"

#: A WSGI application: what the app, and each middleware it wraps itself in, is.
WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def dumps(data: Any) -> bytes:
    return orjson.dumps(data)


def _media_q(accept: str, offer: str) -> float:
    """The quality the Accept header gives ``offer`` (0 if none)."""
    best_specificity, best_q = -1, 0.0
    otype, osub = offer.split("/")
    for part in accept.split(","):
        fields = part.strip().split(";")
        media = fields[0].strip().lower()
        if "/" not in media:
            continue
        mtype, msub = media.split("/", 1)
        q = 1.0
        for param in fields[1:]:
            key, _, value = param.strip().partition("=")
            if key.strip() == "q":
                try:
                    q = float(value)
                except ValueError:
                    q = 0.0
        if mtype == "*" and msub == "*":
            spec = 0
        elif mtype == otype and msub == "*":
            spec = 1
        elif mtype == otype and msub == osub:
            spec = 2
        else:
            continue
        if spec > best_specificity:
            best_specificity, best_q = spec, q
    return best_q


def error_media(accept: str | None) -> str:
    """Which media type an error body takes, as upstream chooses it."""
    if not accept or accept.strip() == "*/*":
        return JSON
    html_q, json_q = _media_q(accept, "text/html"), _media_q(accept, JSON)
    if html_q <= 0 and json_q <= 0:
        return "text/plain"
    return "text/html" if html_q >= json_q else JSON


def accepts_json(accept: str | None) -> bool:
    """True when the Accept header allows application/json."""
    if not accept:
        return True
    return _media_q(accept, JSON) > 0


def _status_line(status: int) -> str:
    return "%d %s" % (status, STATUS_TEXT.get(status, ("Error", ""))[0])


def _encode(
    problem: HTTPProblem, media: str, request_id: str | None, with_code: bool, method: str
) -> bytes:
    data = problem.to_dict(request_id, with_code=with_code, method=method)
    if media == JSON:
        return dumps(data)
    line = _status_line(problem.status)
    if media == "text/html":
        # WebOb's page keeps the detail's lines and marks, escaped.
        page = "%s<br /><br />\n%s\n\n" % (
            _escape(problem.explanation(method)),
            _escape(problem.detail),
        )
        return (
            "<html>\n <head>\n  <title>%s</title>\n </head>\n <body>\n"
            "  <h1>%s</h1>\n  %s\n </body>\n</html>" % (line, line, page)
        ).encode()
    return ("%s\n\n%s" % (line, data["errors"][0]["detail"])).encode()


def _escape(text: str) -> str:
    """``text`` escaped as WebOb escapes it for a page: also every
    character beyond ASCII, as a character reference."""
    return html.escape(text).encode("ascii", "xmlcharrefreplace").decode()


def error(
    req: falcon.Request, resp: falcon.Response, problem: HTTPProblem, *, with_code: bool
) -> None:
    """Fill ``resp`` with ``problem`` in the Placement error format."""
    media = error_media(req.get_header("accept"))
    resp.status = problem.status
    resp.content_type = media if media == JSON else media + "; charset=UTF-8"
    for key, value in problem.headers.items():
        resp.set_header(key, value)
    resp.data = _encode(problem, media, req.context.get("request_id"), with_code, req.method)


class RawResponse:
    """A complete response for the WSGI layers outside Falcon."""

    def __init__(self, status: int, headers: list[tuple[str, str]], body: bytes) -> None:
        self.status, self.headers, self.body = status, headers, body

    def send(self, start_response: Callable[..., Any]) -> Iterable[bytes]:
        start_response(_status_line(self.status), self.headers)
        return [self.body]


def error_body(environ: dict[str, Any], problem: HTTPProblem) -> RawResponse:
    """An error response built straight from a WSGI environ."""
    media = error_media(environ.get("HTTP_ACCEPT"))
    body = _encode(
        problem, media, environ.get("berth.request_id"), False, environ.get("REQUEST_METHOD", "")
    )
    ctype = media if media == JSON else media + "; charset=UTF-8"
    headers = [("Content-Type", ctype), ("Content-Length", str(len(body)))]
    headers += list(problem.headers.items())
    return RawResponse(problem.status, headers, body)
