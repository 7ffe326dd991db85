"""Connection URLs as upstream's ``placement.conf`` files write them.

Deployment tools write ``mysql://``, ``mysql+pymysql://``,
``mysql+mysqldb://``, ``postgresql://`` and ``postgresql+psycopg2://``,
often with query arguments (``charset=utf8``, SSL options, devstack's
``plugin=dbcounter``). Berth ships PyMySQL and psycopg 3; a URL that
names a driver which is not installed is served by the one Berth ships,
and :func:`resolve` says so in a note that start-up logs once.
"""

from __future__ import annotations

import difflib
import importlib.util
import re
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import URL

__all__ = ["resolve", "masked", "BadURL", "SUPPORTED"]

#: The backends Berth serves (``mariadb://`` is SQLAlchemy's MySQL dialect
#: under MariaDB's name).
SUPPORTED = ("postgresql", "mysql", "mariadb", "sqlite")
#: Names people write for a supported backend.
_ALIASES = {
    "postgres": "postgresql",
    "pgsql": "postgresql",
    "pg": "postgresql",
    "psql": "postgresql",
    "maria": "mariadb",
    "sqlite3": "sqlite",
}


class BadURL(ValueError):
    """A connection URL Berth cannot serve; the message is one line
    saying why, and what was probably meant."""


#: The driver Berth ships for each backend, and the module that proves a
#: named driver is installed.
_SHIPPED = {"postgresql": "psycopg", "mysql": "pymysql"}
_MODULES = {
    "psycopg2": "psycopg2",
    "psycopg": "psycopg",
    "pg8000": "pg8000",
    "pymysql": "pymysql",
    "mysqldb": "MySQLdb",
    "mysqlconnector": "mysql.connector",
    "mariadbconnector": "mariadb",
}
#: Query arguments the standard library's sqlite3 driver accepts; others
#: (``charset=utf8`` copied from a MySQL URL) mean nothing to SQLite.
_SQLITE_ARGS = {
    "timeout",
    "isolation_level",
    "detect_types",
    "check_same_thread",
    "cached_statements",
    "uri",
}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _plugins_installed(url: URL) -> tuple[URL, list[str]]:
    """Drop ``plugin=`` arguments naming SQLAlchemy plugins that are not
    installed (devstack adds ``plugin=dbcounter``)."""
    wanted = url.query.get("plugin")
    if not wanted:
        return url, []
    names = [wanted] if isinstance(wanted, str) else list(wanted)
    from sqlalchemy.dialects import plugins as registry

    keep, dropped = [], []
    for name in names:
        try:
            registry.load(name)
            keep.append(name)
        except sa.exc.NoSuchModuleError:
            dropped.append(name)
    if not dropped:
        return url, []
    url = url.difference_update_query(["plugin"])
    if keep:
        url = url.update_query_dict({"plugin": keep})
    return url, ["SQLAlchemy plugin(s) %s not installed: ignored" % ", ".join(dropped)]


def resolve(url: str | URL) -> tuple[URL, list[str]]:
    """The URL Berth connects with, and notes on what it changed.

    A bare ``postgresql://`` or ``mysql://`` gets Berth's driver; a named
    driver that is not installed is replaced by Berth's. Query arguments
    are kept, except for SQLite those its driver does not accept.
    Raises :class:`BadURL` for a URL that does not parse or names a
    backend Berth does not serve.
    """
    parsed = _parse(url)
    backend = parsed.get_backend_name()
    notes: list[str] = []
    if backend in _SHIPPED:
        shipped = _SHIPPED[backend]
        named = parsed.get_driver_name() if "+" in parsed.drivername else None
        if named is None:
            parsed = parsed.set(drivername="%s+%s" % (backend, shipped))
        elif named != shipped and not _installed(_MODULES.get(named, named)):
            parsed = parsed.set(drivername="%s+%s" % (backend, shipped))
            notes.append(
                "the connection URL names driver %s, which is not "
                "installed: %s serves it" % (named, shipped)
            )
    elif backend == "sqlite":
        extra = sorted(k for k in parsed.query if k not in _SQLITE_ARGS)
        if extra and parsed.query.get("uri") != "true":
            parsed = parsed.difference_update_query(extra)
            notes.append("query argument(s) %s mean nothing to SQLite: ignored" % ", ".join(extra))
    parsed, plugin_notes = _plugins_installed(parsed)
    return parsed, notes + plugin_notes


def _parse(url: str | URL) -> URL:
    try:
        parsed = sa.engine.make_url(url)
    except (sa.exc.ArgumentError, ValueError):
        raise BadURL(
            "%r is not a database URL (for example postgresql://"
            "user:password@host/placement, mysql+pymysql://user:"
            "password@host/placement or sqlite:////var/lib/"
            "placement/placement.sqlite)" % _shown(url)
        ) from None
    backend = parsed.get_backend_name()
    if backend not in SUPPORTED:
        near = _ALIASES.get(backend) or next(
            iter(difflib.get_close_matches(backend, SUPPORTED, n=1)), ""
        )
        raise BadURL(
            "unknown database %r: Berth serves %s%s"
            % (backend, ", ".join(SUPPORTED), " (did you mean %s://?)" % near if near else "")
        )
    return parsed


def check_folder(url: str | URL) -> None:
    """Raise :class:`BadURL` when ``url`` is an SQLite file in a folder
    that does not exist (checked when a server or command starts; a
    folder that goes away later is a lost database, not a bad URL)."""
    parsed = _parse(url)
    if (
        parsed.get_backend_name() == "sqlite"
        and parsed.database not in (None, "", ":memory:")
        and parsed.query.get("uri") != "true"
    ):
        folder = Path(parsed.database or "").resolve().parent
        if not folder.is_dir():
            raise BadURL("the folder of the SQLite file, %s, does not exist" % folder)


def _shown(url: str | URL) -> str:
    """A URL that did not parse, its password (if it looks like one) out."""
    text = str(url)
    return re.sub(r"(://[^:/@]*:)[^@]*@", r"\1***@", text)


def masked(url: str | URL) -> str:
    """``url`` with its password replaced by ``***``, for printing (a URL
    that does not parse too)."""
    try:
        return sa.engine.make_url(url).render_as_string(hide_password=True)
    except (sa.exc.ArgumentError, ValueError):
        return _shown(url)
