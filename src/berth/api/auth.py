"""Authentication: ``noauth2`` for tests and local use, or Keystone.

Both leave the caller's identity in the WSGI environ as keystonemiddleware
does (``HTTP_X_USER_ID``, ``HTTP_X_PROJECT_ID``, ``HTTP_X_ROLES``), where
oslo.context picks it up. ``/`` (version discovery) and ``/openapi.json``
(the API's description) need no token.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from oslo_config import cfg

from berth.api import errors, render

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


#: Paths served without a token.
PUBLIC = ("", "/", "/openapi.json")


def _is_root(environ: dict[str, Any]) -> bool:
    return environ.get("PATH_INFO", "") in PUBLIC


class NoAuth:
    """``X-Auth-Token: user[:project]``; ``admin`` gets the admin role and
    ``X-Roles`` overrides the roles. No token gets 401."""

    def __init__(self, app: WSGIApp) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any],
                 start_response: Callable[..., Any]) -> Iterable[bytes]:
        if _is_root(environ):
            return self.app(environ, start_response)
        token = environ.get("HTTP_X_AUTH_TOKEN")
        if not token:
            problem = errors.HTTPProblem(401)
            return render.error_body(environ, problem).send(start_response)
        user_id, _, project_id = token.partition(":")
        project_id = project_id or user_id
        environ["HTTP_X_USER_ID"] = user_id
        if not environ.get("HTTP_X_PROJECT_ID"):
            environ["HTTP_X_PROJECT_ID"] = project_id
        if not environ.get("HTTP_X_ROLES"):
            environ["HTTP_X_ROLES"] = ("admin,member,reader"
                                       if user_id == "admin" else "")
        return self.app(environ, start_response)


class KeystoneAuth:
    """keystonemiddleware's auth_token, skipped for version discovery."""

    def __init__(self, app: WSGIApp, conf: cfg.ConfigOpts) -> None:
        from keystonemiddleware import auth_token
        self.app = app
        self.protected = auth_token.AuthProtocol(
            app, {"oslo_config_config": conf})

    def __call__(self, environ: dict[str, Any],
                 start_response: Callable[..., Any]) -> Iterable[bytes]:
        if _is_root(environ):
            return self.app(environ, start_response)
        result: Iterable[bytes] = self.protected(environ, start_response)
        return result


def wrap(app: WSGIApp, conf: cfg.ConfigOpts) -> WSGIApp:
    """Put the configured authentication in front of ``app``."""
    if conf.api.auth_strategy == "noauth2":
        return NoAuth(app)
    return KeystoneAuth(app, conf)
