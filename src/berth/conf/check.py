"""Checks of a configuration before anything starts: each problem is one
line that names the file and what was meant.

- :func:`unknown_names`: sections and options a file sets that Berth does
  not read (a typo such as ``[placement_databse]`` included), each with
  the nearest known name. ``berth`` reports them as warnings when it
  starts, and refuses to start with ``[berth] strict_config = true``.
- :func:`check_bind`: ``noauth2`` (no authentication) is served on a
  non-loopback address only when a configuration file says
  ``auth_strategy = noauth2``.

The database connection itself is checked by ``berth.conf.database_url``:
a configuration file without one is refused, never replaced by the
embedded database.
"""

from __future__ import annotations

import difflib
import ipaddress
import socket
from typing import Any

from oslo_config import cfg

from berth import conf as berth_conf
from berth.conf import opts as berth_opts

#: Sections of upstream's placement.conf that Berth reads nothing from,
#: and why they are not reported as unknown.
IGNORED_SECTIONS = {
    "profiler": "osprofiler tracing (upstream's optional profiler)",
}


class ConfigProblem(ValueError):
    """The configuration cannot be used; the message is one line."""


def known_names(conf: cfg.ConfigOpts) -> dict[str, set[str]]:
    """Every section Berth reads, with its option names (and their
    deprecated names, which oslo.config still honours)."""
    known: dict[str, set[str]] = {}
    for group, options in berth_opts.list_opts(_auth_plugin(conf)):
        for opt in options:
            known.setdefault(group, set()).update({opt.dest, opt.name})
            for old in opt.deprecated_opts:
                if old.name:
                    known.setdefault(old.group or group, set()).add(old.name)
    return known


def _auth_plugin(conf: cfg.ConfigOpts) -> str | None:
    try:
        plugin: str | None = conf.keystone_authtoken.auth_type
    except cfg.Error:
        return None
    return plugin


def _read(path: str) -> dict[str, dict[str, Any]]:
    sections: dict[str, dict[str, Any]] = {}
    cfg.ConfigParser(path, sections).parse()
    return sections


def _nearest(name: str, choices: set[str]) -> str:
    found = difflib.get_close_matches(name, sorted(choices), n=1, cutoff=0.6)
    return found[0] if found else ""


def unknown_names(conf: cfg.ConfigOpts) -> list[str]:
    """One line for each section or option that the configuration files
    set and Berth does not read, with the nearest known name if any."""
    known = known_names(conf)
    lines: list[str] = []
    for path in berth_conf.config_files(conf):
        for section, values in _read(path).items():
            if section in IGNORED_SECTIONS:
                continue
            if section not in known:
                near = _nearest(section, set(known))
                lines.append("%s: unknown section [%s]%s" % (
                    path, section,
                    " (did you mean [%s]?)" % near if near else ""))
                continue
            for name in values:
                if name not in known[section]:
                    near = _nearest(name, known[section])
                    lines.append("%s: [%s] unknown option %s%s" % (
                        path, section, name,
                        " (did you mean %s?)" % near if near else ""))
    return lines


def is_loopback(host: str) -> bool:
    """True when every address ``host`` names is a loopback address."""
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    addresses = {str(info[4][0]) for info in infos}
    return bool(addresses) and all(
        ipaddress.ip_address(address.split("%", 1)[0]).is_loopback
        for address in addresses)


def parse_listen(value: str, option: str) -> tuple[str, int]:
    """``host:port`` (IPv6 hosts in brackets) as (host, port); ValueError
    naming ``[berth] option`` for anything else."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError("[berth] %s must be host:port, not %r"
                         % (option, value))
    return host.strip("[]"), int(port)


def check_bind(conf: cfg.ConfigOpts, host: str) -> None:
    """Raise :class:`ConfigProblem` unless serving ``conf``'s
    authentication on ``host`` is what a configuration file asked for:
    ``noauth2`` beyond a loopback address needs ``auth_strategy =
    noauth2`` written in a file."""
    if conf.api.auth_strategy != "noauth2" or is_loopback(host):
        return
    where = conf.get_location("auth_strategy", "api")
    source = where.location.name if where is not None else "unknown"
    if (where is not None and where.location == cfg.Locations.user
            and where.detail in set(berth_conf.config_files(conf))):
        return
    if berth_conf.is_embedded(conf):
        raise ConfigProblem(
            "refusing to serve the embedded database without authentication "
            "on %s: with no configuration file Berth binds only to a "
            "loopback address (127.0.0.1); to serve the network, write a "
            "placement.conf with [placement_database] connection and [api] "
            "auth_strategy" % host)
    raise ConfigProblem(
        "refusing to serve noauth2 (no authentication) on %s: "
        "auth_strategy = noauth2 must be written in a configuration file "
        "to serve beyond a loopback address (it came from %s)"
        % (host, source))
