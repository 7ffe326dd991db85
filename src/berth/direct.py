"""Direct access: the real API, in-process, over the configured database.

``PlacementDirect(conf)`` is a context manager giving an ``httpx.Client``
whose transport calls the WSGI application directly (no server, no
socket): requests pass the same schema validation, microversion handling,
policy checks and transactions as over HTTP. The offline
``berth migrate-inventory`` command and tests use it; so can any tool that
needs Placement while only the database is running.

Authentication. There is no Keystone to ask offline, so the application
is built with ``noauth2`` whatever ``[api] auth_strategy`` says (the
configuration is changed only while the app is built, then restored),
and every request carries the identity of a trusted service user:
user and project ``berth-direct``, roles ``admin``, ``service``,
``member`` and ``reader``, project-scoped. That satisfies both the legacy
defaults (admin) and the new secure-RBAC defaults (service, e.g. for
``POST /reshaper``). Policy is still enforced: a policy file that denies
those roles denies direct access too. The identity never leaves the
process, because there is no network path to the app.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import httpx
from oslo_config import cfg

from berth.api.app import create_app
from berth.db.engine import Database

__all__ = ["PlacementDirect", "DIRECT_USER", "DIRECT_ROLES"]

DIRECT_USER = "berth-direct"
DIRECT_ROLES = "admin,service,member,reader"
BASE_URL = "http://placement.direct"


def _build_app(conf: cfg.ConfigOpts, db: Database | None) -> Any:
    previous = conf.api.auth_strategy
    conf.set_override("auth_strategy", "noauth2", group="api")
    try:
        return create_app(conf, db)
    finally:
        # Restore what the caller had: an override if they set one, or
        # the value read from their files.
        conf.clear_override("auth_strategy", group="api")
        if conf.api.auth_strategy != previous:
            conf.set_override("auth_strategy", previous, group="api")


class PlacementDirect:
    """``with PlacementDirect(conf) as client: client.get(...)``.

    ``db`` reuses an existing :class:`~berth.db.engine.Database` (tests);
    by default one is made from ``[placement_database]`` and disposed of
    on exit. ``microversion`` sets the default ``openstack-api-version``
    (``None`` sends none, meaning 1.0; ``"latest"`` is accepted).
    ``latest_microversion=True`` is upstream Placement's spelling of
    ``microversion="latest"``; giving both is a ValueError.
    """

    def __init__(
        self,
        conf: cfg.ConfigOpts,
        db: Database | None = None,
        microversion: str | None = None,
        *,
        latest_microversion: bool = False,
    ) -> None:
        if latest_microversion:
            if microversion not in (None, "latest"):
                raise ValueError("give microversion or latest_microversion, not both")
            microversion = "latest"
        self.conf = conf
        self._db = db
        self._own_db = db is None
        self.microversion = microversion
        self.client: httpx.Client | None = None

    def __enter__(self) -> httpx.Client:
        if self._db is None:
            from berth.db import setup

            self._db = setup.database_from_conf(self.conf)
        app = _build_app(self.conf, self._db)
        headers = {
            "x-auth-token": DIRECT_USER,
            "x-roles": DIRECT_ROLES,
            "accept": "application/json",
        }
        if self.microversion:
            headers["openstack-api-version"] = "placement %s" % self.microversion
        self.client = httpx.Client(
            transport=httpx.WSGITransport(app=app), base_url=BASE_URL, headers=headers
        )
        return self.client

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.client is not None:
            self.client.close()
            self.client = None
        if self._own_db and self._db is not None:
            self._db.dispose()
            self._db = None
