"""The one place the client library talks HTTP.

Two kinds of connection are accepted, so the same report client runs in a
service (keystoneauth) and in tools and tests (httpx, or direct access):

* an ``httpx.Client`` whose ``base_url`` points at the Placement endpoint
  and which carries any auth headers (``PlacementDirect`` gives one);
* a keystoneauth1 ``Session`` or ``Adapter``: requests go through its
  ``request(url, method, ...)`` with ``microversion=`` and, for a bare
  session, an endpoint filter for service type ``placement``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol
from urllib.parse import quote

import httpx

from berth.client.exceptions import PlacementAPIError

#: Microversion for provider, inventory, trait and aggregate calls
#: (1.14: in_tree and parents; 1.19: aggregates carry the generation;
#: 1.20: POST answers with the created provider; 1.23: error codes;
#: 1.26: reserved may equal total). Below 1.37, so a provider update can
#: never re-parent by accident.
PROVIDER_VERSION = "1.36"
#: Allocations with consumer generation, project and user.
ALLOCATION_VERSION = "1.28"
RESHAPE_VERSION = "1.30"
#: PUT /resource_providers/{uuid} may change the parent (or make a root).
REPARENT_VERSION = "1.37"
#: Needed to send consumer_type (and then required for every consumer).
RESHAPE_TYPED_VERSION = "1.38"

RP = "/resource_providers"


def rp_path(uuid: str, tail: str = "") -> str:
    """The URL path of provider ``uuid``, plus ``tail``."""
    return "%s/%s%s" % (RP, quote(uuid, safe=""), tail)


class Response(Protocol):
    """What both httpx and requests responses offer."""

    @property
    def status_code(self) -> int: ...

    @property
    def text(self) -> str: ...

    @property
    def headers(self) -> Mapping[str, str]: ...

    def json(self) -> Any: ...


class Connection:
    """Sends one request at a given microversion; decodes the answer."""

    def __init__(self, http: Any, interface: str = "internal") -> None:
        self.http = http
        self.interface = interface
        #: The ``Berth-Position`` header of the last answer (None when it
        #: had none: a write, or upstream Placement).
        self.position: str | None = None

    def _send(self, method: str, path: str, version: str, body: Any | None) -> Response:
        if isinstance(self.http, httpx.Client):
            return self.http.request(
                method, path, json=body, headers={"openstack-api-version": "placement %s" % version}
            )
        kwargs: dict[str, Any] = {"microversion": version, "raise_exc": False}
        if body is not None:
            kwargs["json"] = body
        # A keystoneauth Adapter already knows its service; a Session
        # needs to be told which endpoint to use.
        if getattr(self.http, "service_type", None) is None:
            kwargs["endpoint_filter"] = {"service_type": "placement", "interface": self.interface}
        response: Response = self.http.request(path, method, **kwargs)
        return response

    def call(
        self,
        method: str,
        path: str,
        version: str,
        body: Any | None = None,
        ok: tuple[int, ...] = (200,),
    ) -> Any:
        """The decoded JSON body (None for 204), or PlacementAPIError."""
        response = self._send(method, path, version, body)
        self.position = response.headers.get("berth-position")
        if response.status_code not in ok:
            code, detail = _error_of(response)
            raise PlacementAPIError(method, path, response.status_code, detail, code)
        if response.status_code == 204 or not response.text:
            return None
        return response.json()


def _error_of(response: Response) -> tuple[str | None, str]:
    """The Placement error code and detail of an error response."""
    try:
        error = response.json()["errors"][0]
        return error.get("code"), str(error.get("detail", "")).strip()
    except (ValueError, KeyError, IndexError, TypeError):
        return None, response.text.strip()[:500]
