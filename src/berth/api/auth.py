"""Authentication: ``noauth2`` for tests and local use, or Keystone.

Both leave the caller's identity in the WSGI environ as keystonemiddleware
does (``HTTP_X_USER_ID``, ``HTTP_X_PROJECT_ID``, ``HTTP_X_ROLES``), where
oslo.context picks it up. ``/`` (version discovery) needs no token.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from oslo_config import cfg

from berth.api import errors, render

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def _is_root(environ: dict[str, Any]) -> bool:
    """Version discovery and the dashboard's stylesheet need no token."""
    path = environ.get("PATH_INFO", "")
    return path in ("", "/") or path.startswith("/dashboard/static/")


def _is_dashboard(environ: dict[str, Any]) -> bool:
    path = str(environ.get("PATH_INFO", ""))
    return path == "/dashboard" or path.startswith("/dashboard/")


class NoAuth:
    """``X-Auth-Token: user[:project]``; ``admin`` gets the admin role and
    ``X-Roles`` overrides the roles. No token gets 401, except on the
    dashboard: a browser sends no header, so there it stands for
    ``admin`` (noauth2 trusts every caller to name itself anyway)."""

    def __init__(self, app: WSGIApp) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any],
                 start_response: Callable[..., Any]) -> Iterable[bytes]:
        if _is_root(environ):
            return self.app(environ, start_response)
        token = environ.get("HTTP_X_AUTH_TOKEN")
        if not token and _is_dashboard(environ):
            token = "admin"
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
