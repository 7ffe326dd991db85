"""The words an entry of the OpenAPI document's operation tables is
written in: :class:`Operation` (what one method of one route does), a
body no handler reads, one schema for every microversion, and links
between operations (``operations`` holds upstream's, ``berth_operations``
Berth's own)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from berth.api.schemas import FastValidator, Versioned, validator


@dataclass(frozen=True)
class Operation:
    """What one method of one route does, for the document.

    ``ok`` maps each success status to its body schema (None: no body);
    ``errors`` lists the statuses specific to the operation (the ones every
    operation may answer are added for all); ``cached`` marks answers that
    carry ``last-modified`` and ``cache-control`` from 1.15.
    """

    summary: str
    ok: dict[int, dict[str, Any] | None]
    body: Versioned = ()
    query: Versioned = ()
    errors: tuple[int, ...] = ()
    cached: bool = False
    description: str = ""
    public: bool = False
    links: dict[int, dict[str, Any]] = field(default_factory=dict)
    #: The success body's media types when it is not JSON (media -> the
    #: OpenAPI media object).
    media: dict[str, Any] | None = None
    #: The token may be left out (the dashboard under noauth2, where a
    #: browser's request without one stands for admin).
    token_optional: bool = False
    #: What each Berth-only query parameter is, in words (upstream's are
    #: described by the microversion they appear in).
    words: dict[str, str] = field(default_factory=dict)
    #: The process serving a route of ``routes.SERVED_ELSEWHERE`` (empty:
    #: the API's own).
    served_by: str = ""


#: A body the handler does not read.
IGNORED = validator({"description": "Not read."})


def one(schema: FastValidator) -> Versioned:
    """``schema`` for every microversion."""
    return (("1.0", schema),)


def operation_id(method: str, path: str) -> str:
    """The operation's id: the method and the path's words, as
    ``get_resource_providers_uuid``."""
    words = [w.strip("{}") for w in path.strip("/").split("/") if w]
    return "_".join([method.lower()] + (words or ["root"])).replace(".", "_")


def link(method: str, path: str, parameters: dict[str, str], body: Any = None) -> dict[str, Any]:
    """An OpenAPI link to ``method path`` (stateful test tools follow
    these: a new provider's uuid feeds its inventories, and so on)."""
    link: dict[str, Any] = {"operationId": operation_id(method, path), "parameters": parameters}
    if body is not None:
        link["requestBody"] = body
    return link
