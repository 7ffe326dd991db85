"""The Placement error format, and the one table that maps errors to it.

Every error response has the body::

    {"errors": [{"status": 404, "title": "Not Found", "detail": "...",
                 "request_id": "req-...", "code": "placement.undefined_code"}]}

``code`` appears from microversion 1.23 on. Codes never change once
published.
"""

from __future__ import annotations

import difflib
import logging
import re
from collections.abc import Iterable
from typing import Any

from berth.db.engine import TX_ATTEMPTS, is_retryable, is_unavailable
from berth.domain import errors as de
from berth.domain import limits
from berth.metrics import Metrics

# Stable error codes (upstream's values).
DEFAULT = "placement.undefined_code"
INVENTORY_INUSE = "placement.inventory.inuse"
CONCURRENT_UPDATE = limits.CONCURRENT_UPDATE
DUPLICATE_NAME = "placement.duplicate_name"
PROVIDER_IN_USE = "placement.resource_provider.inuse"
PROVIDER_CANNOT_DELETE_PARENT = "placement.resource_provider.cannot_delete_parent"
RESOURCE_PROVIDER_NOT_FOUND = "placement.resource_provider.not_found"
QUERY_DUPLICATE_KEY = "placement.query.duplicate_key"
QUERY_BAD_VALUE = "placement.query.bad_value"
QUERY_MISSING_VALUE = "placement.query.missing_value"
#: Berth's own: the change feed's history after that position is gone.
CHANGES_GONE = "berth.changes.gone"

ALL_CODES = (
    DEFAULT,
    INVENTORY_INUSE,
    CONCURRENT_UPDATE,
    DUPLICATE_NAME,
    PROVIDER_IN_USE,
    PROVIDER_CANNOT_DELETE_PARENT,
    RESOURCE_PROVIDER_NOT_FOUND,
    QUERY_DUPLICATE_KEY,
    QUERY_BAD_VALUE,
    QUERY_MISSING_VALUE,
    CHANGES_GONE,
)

#: Title and explanation per status, worded as upstream (webob) words them.
STATUS_TEXT: dict[int, tuple[str, str]] = {
    400: (
        "Bad Request",
        "The server could not comply with the request "
        "since it is either malformed or otherwise incorrect.",
    ),
    401: (
        "Unauthorized",
        "This server could not verify that you are "
        "authorized to access the document you requested.",
    ),
    403: ("Forbidden", "Access was denied to this resource."),
    404: ("Not Found", "The resource could not be found."),
    405: ("Method Not Allowed", "The method %(method)s is not allowed for this resource."),
    406: (
        "Not Acceptable",
        "The resource could not be generated that was acceptable to your browser.",
    ),
    409: ("Conflict", "There was a conflict when trying to complete your request."),
    410: ("Gone", "This resource is no longer available.  No forwarding address is given."),
    411: ("Length Required", "Content-Length header required."),
    413: ("Request Entity Too Large", "The body of your request was too large for this server."),
    414: ("Request-URI Too Long", "The request URI was too long for this server."),
    415: ("Unsupported Media Type", "The request media type is not supported by this server."),
    431: ("Request Header Fields Too Large", "The request headers were too large for this server."),
    500: (
        "Internal Server Error",
        "The server has either erred or is incapable of performing the requested operation.",
    ),
    503: (
        "Service Unavailable",
        "The server is currently unavailable. Please try again at a later time.",
    ),
}

#: Domain error class -> (HTTP status, error code). Looked up along the MRO,
#: so the most specific class listed wins.
DOMAIN_ERRORS: dict[type[de.DomainError], tuple[int, str]] = {
    de.DomainError: (400, DEFAULT),
    de.BadRequest: (400, DEFAULT),
    de.QueryBadValue: (400, QUERY_BAD_VALUE),
    de.QueryMissingValue: (400, QUERY_MISSING_VALUE),
    de.QueryDuplicateKey: (400, QUERY_DUPLICATE_KEY),
    de.ProviderNotFoundForWrite: (400, DEFAULT),
    de.NotFound: (404, DEFAULT),
    de.Forbidden: (403, DEFAULT),
    de.Conflict: (409, DEFAULT),
    de.ConcurrentUpdate: (409, CONCURRENT_UPDATE),
    de.DuplicateName: (409, DUPLICATE_NAME),
    de.InventoryInUse: (409, INVENTORY_INUSE),
    de.ProviderInUse: (409, PROVIDER_IN_USE),
    de.CannotDeleteParent: (409, PROVIDER_CANNOT_DELETE_PARENT),
    de.ProviderNotFoundConflict: (409, RESOURCE_PROVIDER_NOT_FOUND),
    de.CapacityExceeded: (409, DEFAULT),
    de.UnknownResourceClass: (400, DEFAULT),
    de.ClaimedProviderDeleted: (409, CONCURRENT_UPDATE),
    de.ProviderNotFoundInBody: (400, RESOURCE_PROVIDER_NOT_FOUND),
    de.HistoryGone: (410, CHANGES_GONE),
}


def status_and_code(exc: de.DomainError) -> tuple[int, str]:
    """Map a domain error to its HTTP status and Placement error code."""
    for klass in type(exc).__mro__:
        if klass in DOMAIN_ERRORS:
            return DOMAIN_ERRORS[klass]
    return 400, DEFAULT


class HTTPProblem(Exception):
    """An error response raised by the HTTP layer itself.

    ``detail`` is the specific message; the body's ``detail`` field adds
    the status's general explanation in front, as upstream does. ``extra``
    fields join the error object (a 406 names ``max_version`` and
    ``min_version``).
    """

    def __init__(
        self,
        status: int,
        detail: str = "",
        code: str = DEFAULT,
        headers: dict[str, str] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(detail)
        self.status = status
        self.detail = detail
        self.code = code
        self.headers = headers or {}
        self.extra = extra or {}

    def explanation(self, method: str = "") -> str:
        """The status's general explanation, as WebOb words it."""
        return STATUS_TEXT.get(self.status, ("Error", ""))[1] % {"method": method}

    def to_dict(
        self, request_id: str | None, *, with_code: bool, method: str = ""
    ) -> dict[str, Any]:
        """The body of this error, in the Placement format."""
        title = STATUS_TEXT.get(self.status, ("Error", ""))[0]
        explanation = self.explanation(method)
        detail = explanation
        if self.detail:
            detail = "%s\n\n %s  " % (explanation, as_webob_shows(self.detail))
        error: dict[str, Any] = {"status": self.status, "title": title, "detail": detail}
        if with_code:
            error["code"] = self.code
        if request_id:
            error["request_id"] = request_id
        error.update(self.extra)
        return {"errors": [error]}


#: What WebOb's ``strip_tags`` (upstream's plain-text and JSON error
#: formatting) removes or turns into a line break.
_BR = re.compile(r"<br.*?>", re.I | re.S)
_COMMENT = re.compile(r"<!--|-->")
_TAG = re.compile(r"<.*?>", re.S)


def as_webob_shows(detail: str) -> str:
    """``detail`` as upstream's error bodies carry it: WebOb joins the
    lines (so jsonschema's several-line refusal is one line, and a client
    that prints the last line of ``detail`` shows the reason, not the bad
    value alone), drops carriage returns, and takes anything between
    ``<`` and ``>`` for HTML: a ``<br>`` becomes a line break, other tags
    and comment marks go."""
    text = detail.replace("\n", " ").replace("\r", "")
    return _TAG.sub("", _COMMENT.sub("", _BR.sub("\n", text)))


def from_domain(exc: de.DomainError) -> HTTPProblem:
    """Turn a domain error into the HTTP error it stands for."""
    status, code = status_and_code(exc)
    extra = {"oldest_position": exc.oldest} if isinstance(exc, de.HistoryGone) else None
    return HTTPProblem(status, exc.message, code, extra=extra)


def from_exception(
    exc: Exception, doing: str, log: logging.Logger, metrics: Metrics
) -> HTTPProblem:
    """The answer to a request that raised ``exc`` (``doing`` names the
    request in the log): an ``HTTPProblem`` as it is, a domain error as
    ``DOMAIN_ERRORS`` maps it, 503 for an unreachable database, 409
    ``placement.concurrent_update`` when ``Database.run`` ran out of
    retries, 500 (logged with its traceback) for anything else. A 409 is
    counted in ``metrics`` (``berth_conflicts_total``). The one
    mapping of the app's error handler and the watch server's."""
    if isinstance(exc, HTTPProblem):
        problem = exc
    elif isinstance(exc, de.DomainError):
        problem = from_domain(exc)
    elif is_unavailable(exc):
        log.warning("database unavailable %s: %s", doing, getattr(exc, "orig", exc))
        problem = HTTPProblem(503, "The database is not reachable.")
    elif is_retryable(exc):
        # Database.run's own retries ran out (every attempt deadlocked or,
        # on Galera, lost certification): nothing was written, and the
        # client resolves it as any other concurrent update, by retrying.
        log.warning(
            "transaction still losing races after %d attempts %s: %s",
            TX_ATTEMPTS,
            doing,
            getattr(exc, "orig", exc),
        )
        problem = from_domain(
            de.ConcurrentUpdate(
                "The database refused the transaction %d times as conflicting "
                "with concurrent ones; nothing was changed. Try the request "
                "again." % TX_ATTEMPTS
            )
        )
    else:
        log.exception("unexpected error %s", doing)
        problem = HTTPProblem(
            500, "An unexpected error occurred; the request id identifies it in the server log."
        )
    if problem.status == 409:
        metrics.conflict(problem.code)
    return problem


#: jsonschema's words for a query parameter no schema property or pattern
#: matches, with and without pattern properties.
#: Several unknown ones come as "'a', 'b' do not match": the first is named.
_NO_PATTERN = re.compile(
    r"'([^']*)'(?:, '[^']*')* (?:does|do) not match any "
    r"of the regexes: (.*)"
)
_UNEXPECTED = re.compile(
    r"Additional properties are not allowed \((.*) "
    r"(?:was|were) unexpected\)"
)


#: jsonschema's words for a value its ``pattern`` refuses, and the
#: property it stands in (the last of the path after the schema dump).
_MISMATCH = re.compile(
    r"'([^']*)' does not match '.*?"
    r"On instance(?:\[[^\]]*\])*\['([^']+)'\]",
    re.S,
)
#: What a valid value is, for the patterns people meet on Berth's own
#: surfaces (upstream's ``limit``), in place of the pattern itself.
_PATTERN_WORDS = {"limit": "a whole number from 1 up"}
#: The refusals of an unknown resource class or trait.
_NO_CLASS = re.compile(r"No such resource class ([^ ,.]+)")
_NO_TRAIT = re.compile(r"No such trait\(s\): ([^ ,.]+)")


def shown(value: str, most: int = 40) -> str:
    """``value`` quoted, cut to ``most`` characters: a line that echoes
    what people typed stays one short line."""
    return repr(value if len(value) <= most else value[: most - 3] + "...")


def must_be(name: str, what: str, value: str) -> str:
    """The one line for a bad value: what ``name`` must be, not ``value``
    (its first 40 characters)."""
    return "%s must be %s, not %s" % (name, what, shown(value))


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean X?)`` for the nearest of ``choices`` to
    ``name``, or nothing."""
    near = difflib.get_close_matches(name, sorted(c for c in choices if c), n=1)
    return " (did you mean %s?)" % near[0] if near else ""


def for_people(detail: str, known: Iterable[str] = (), names: Iterable[str] = ()) -> str:
    """One line saying what is wrong, from the ``detail`` of an error body
    (upstream's wording, which the API keeps): the status's general
    explanation, schema dumps, patterns and the offending instance left
    out; an unknown query parameter named with the nearest of the
    schema's names and ``known``; an unknown resource class or trait
    with the nearest of ``names``. For the command line and the
    dashboard, never for upstream's URL space."""
    text = detail.split("\n\n", 1)[-1].strip()
    line = text.splitlines()[0].strip() if text else detail.strip()
    mismatch = _MISMATCH.search(text)
    if mismatch:
        value, name = mismatch.groups()
        if name in _PATTERN_WORDS:
            return must_be(name, _PATTERN_WORDS[name], value)
        return "%r is not a valid %s" % (value, name)
    unknown_name = _NO_CLASS.search(line) or _NO_TRAIT.search(line)
    if unknown_name:
        hint = did_you_mean(unknown_name.group(1), names)
        return line[:-1] + hint + "." if hint and line.endswith(".") else (line + hint)
    # The schema dump after jsonschema's one-line reason.
    line = line.split("  Failed validating ", 1)[0]
    prefix, _, rest = line.partition(": ")
    unknown = _NO_PATTERN.search(line)
    if unknown:
        names = set(known) | {
            p.strip("'^").split("(")[0].rstrip("$") for p in unknown.group(2).split(", ")
        }
        return _unknown_parameter(unknown.group(1), names)
    unexpected = _UNEXPECTED.search(line)
    if unexpected:
        name = unexpected.group(1).split(", ")[0].strip("'")
        return _unknown_parameter(name, set(known))
    if prefix == "JSON does not validate" and rest:
        return "the request body does not validate: %s" % rest
    return line


def _unknown_parameter(name: str, choices: set[str]) -> str:
    return "unknown query parameter %r%s" % (name, did_you_mean(name, choices))
