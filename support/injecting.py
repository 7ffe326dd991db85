"""A transport that injects failures or races into in-process requests."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import httpx


@dataclass
class Rule:
    """Requests whose ``METHOD path`` starts with ``prefix``: the first
    ``times`` of them (after letting ``skip`` through) get ``status`` (if
    set) or run ``before`` first."""

    prefix: str
    times: int = 1
    skip: int = 0
    status: int | None = 500
    before: Callable[[], None] | None = None
    seen: int = 0


class Injecting(httpx.BaseTransport):
    """Wraps the transport of an in-process client."""

    def __init__(self, inner: httpx.BaseTransport) -> None:
        self.inner = inner
        self.rules: list[Rule] = []
        #: Every request seen, as ``METHOD path?query``.
        self.log: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        line = "%s %s" % (request.method, request.url.raw_path.decode())
        self.log.append(line)
        for rule in self.rules:
            if line.startswith(rule.prefix) and rule.seen < (rule.times + rule.skip):
                rule.seen += 1
                if rule.seen <= rule.skip:
                    continue
                if rule.before is not None:
                    rule.before()
                if rule.status is not None:
                    return httpx.Response(
                        rule.status,
                        json={
                            "errors": [
                                {
                                    "status": rule.status,
                                    "title": "Injected",
                                    "detail": "injected failure",
                                    "code": None,
                                }
                            ]
                        },
                    )
        return self.inner.handle_request(request)


def injecting_client(http: httpx.Client) -> tuple[httpx.Client, Injecting]:
    """A client like ``http`` (same app, base URL and headers) whose
    requests pass through an :class:`Injecting` transport."""
    transport = Injecting(http._transport)
    return (
        httpx.Client(transport=transport, base_url=http.base_url, headers=http.headers),
        transport,
    )
