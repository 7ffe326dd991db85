"""Authentication: ``noauth2`` for tests and local use, or Keystone.

Both leave the caller's identity in the WSGI environ as keystonemiddleware
does (``HTTP_X_USER_ID``, ``HTTP_X_PROJECT_ID``, ``HTTP_X_ROLES``), where
oslo.context picks it up. The paths in :data:`PUBLIC_PATHS` (version
discovery, the OpenAPI document) need no token; nor does a health probe
(answered before this middleware).

Whatever keystonemiddleware answers by itself (401 for a missing, bad,
expired or revoked token; 503 while Keystone cannot be reached) is
rewritten into the Placement error format, with the request id, keeping
its ``WWW-Authenticate`` header. It asks Keystone again on the next
request, so Berth recovers by itself when Keystone returns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from oslo_config import cfg

from berth.api import errors, render
from berth.api.render import WSGIApp

#: Paths served without a token: version discovery, as upstream, and the
#: API's description. (A health probe without a token is answered before
#: authentication: ``berth.api.healthcheck_middleware.Anonymous``.)
PUBLIC_PATHS = frozenset({"", "/", "/openapi.json"})
#: ...and the dashboard's stylesheet.
PUBLIC_PREFIX = "/dashboard/static/"

#: Set in the environ once keystonemiddleware has let a request through.
_PASSED = "berth.auth_passed"
#: What a caller is told while Keystone cannot be reached.
KEYSTONE_DOWN = (
    "The identity service (Keystone) could not be reached to validate the token; try again shortly."
)


def _is_public(environ: dict[str, Any]) -> bool:
    path = str(environ.get("PATH_INFO", ""))
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIX)


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

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        if _is_public(environ):
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
            environ["HTTP_X_ROLES"] = "admin,member,reader" if user_id == "admin" else ""
        return self.app(environ, start_response)


class KeystoneAuth:
    """keystonemiddleware's auth_token, skipped for :data:`PUBLIC_PATHS`,
    with its own answers turned into Placement-format errors."""

    def __init__(self, app: WSGIApp, conf: cfg.ConfigOpts) -> None:
        from keystonemiddleware import auth_token

        self.app = app
        self.protected = auth_token.AuthProtocol(self._passed, {"oslo_config_config": conf})

    def _passed(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        environ[_PASSED] = True
        return self.app(environ, start_response)

    def __call__(
        self, environ: dict[str, Any], start_response: Callable[..., Any]
    ) -> Iterable[bytes]:
        if _is_public(environ):
            return self.app(environ, start_response)
        own: dict[str, Any] = {}

        def _start(status: str, headers: list[tuple[str, str]], exc_info: Any = None) -> Any:
            if environ.get(_PASSED):
                return start_response(status, headers, exc_info)
            own["status"], own["headers"] = status, headers
            return lambda data: None

        result: Iterable[bytes] = self.protected(environ, _start)
        if environ.get(_PASSED):
            return result
        # keystonemiddleware answered by itself: drop its (HTML or its own
        # JSON) body and answer in Placement's format.
        for _ in result:
            pass
        close = getattr(result, "close", None)
        if close is not None:
            close()
        status = int(str(own.get("status", "500")).split(" ")[0])
        keep = {k: v for k, v in own.get("headers", []) if k.lower() == "www-authenticate"}
        detail = KEYSTONE_DOWN if status == 503 else ""
        problem = errors.HTTPProblem(status, detail, headers=keep)
        return render.error_body(environ, problem).send(start_response)


def wrap(app: WSGIApp, conf: cfg.ConfigOpts) -> WSGIApp:
    """Put the configured authentication in front of ``app``."""
    if conf.api.auth_strategy == "noauth2":
        return NoAuth(app)
    return KeystoneAuth(app, conf)
