"""Checks of a configuration before anything starts: each problem is one
line that names the file and what was meant.

- :func:`unknown_names`: sections and options a file sets that Berth does
  not read (a typo such as ``[placement_databse]`` included), each with
  the nearest known name. ``berth`` reports them as warnings when it
  starts, and refuses to start with ``[berth] strict_config = true``.
- :func:`check_bind`: ``noauth2`` (no authentication) is served on a
  non-loopback address only when a configuration file says
  ``auth_strategy = noauth2``.
- :func:`check_tls`: ``[berth] ssl_cert_file`` and ``ssl_key_file`` come
  together, every TLS file loads, and no ``[berth]`` option is misspelled
  from a TLS one: ``berth serve`` never falls back to plain HTTP.
- :func:`check_auth`: ``auth_strategy = keystone`` needs a
  ``[keystone_authtoken]`` with which keystonemiddleware can validate
  tokens; without one every request would be a 500. ``berth serve``, the
  WSGI entry point and ``berth status upgrade check`` run it.

The database connection itself is checked by ``berth.conf.database_url``:
a configuration file without one is refused, never replaced by the
embedded database.
"""

from __future__ import annotations

import difflib
import ipaddress
import socket
import ssl
from typing import Any

from oslo_config import cfg

from berth import conf as berth_conf
from berth.conf import opts as berth_opts

#: Sections of upstream's placement.conf that Berth reads nothing from,
#: and why they are not reported as unknown.
IGNORED_SECTIONS = {
    "profiler": "osprofiler tracing (upstream's optional profiler)",
}


#: The section keystonemiddleware reads.
AUTHTOKEN = "keystone_authtoken"
#: What [keystone_authtoken] holds in upstream's install guide.
AUTHTOKEN_EXAMPLE = (
    "auth_type = password with auth_url, username, password, "
    "user_domain_name, project_name, project_domain_name; "
    "and www_authenticate_uri"
)


class ConfigProblem(ValueError):
    """The configuration cannot be used; the message is one line."""


def known_names(conf: cfg.ConfigOpts) -> dict[str, set[str]]:
    """Every section Berth reads, with its option names (and their
    deprecated names, which oslo.config still honours). The keystoneauth
    plugin's options are known where keystonemiddleware reads them."""
    from keystoneauth1 import loading

    group, plugin = _auth_plugin(conf)
    options = _plugin_options(plugin)
    listed = berth_opts.list_opts(plugin if options and group == AUTHTOKEN else None)
    if group != AUTHTOKEN:
        listed.append((group, loading.get_auth_common_conf_options() + (options or [])))
    known: dict[str, set[str]] = {}
    for section, opts in listed:
        for opt in opts:
            known.setdefault(section, set()).update({opt.dest, opt.name})
            for old in opt.deprecated_opts:
                if old.name:
                    known.setdefault(old.group or section, set()).add(old.name)
    return known


def _auth_plugin(conf: cfg.ConfigOpts) -> tuple[str, str | None]:
    """Where keystonemiddleware reads its keystoneauth plugin's options
    ([keystone_authtoken], or the section its ``auth_section`` names),
    and the plugin's name (``auth_type``; None when unset)."""
    from keystoneauth1 import loading

    try:
        loading.register_auth_conf_options(conf, AUTHTOKEN)
        group: str = conf[AUTHTOKEN].auth_section or AUTHTOKEN
        plugin: str | None = conf[group].auth_type
    except cfg.Error:
        return AUTHTOKEN, None
    return group, plugin


def _plugin_names() -> set[str]:
    """keystoneauth's plugin names, found without loading any plugin
    (stevedore logs every plugin that fails to load)."""
    from importlib.metadata import entry_points

    return {ep.name for ep in entry_points(group="keystoneauth1.plugin")}


def _plugin_options(plugin: str | None) -> list[Any] | None:
    """keystoneauth ``plugin``'s options; None for no plugin, or one
    that does not exist or does not load."""
    from keystoneauth1 import exceptions, loading

    if not plugin or plugin not in _plugin_names():
        return None
    try:
        options: list[Any] = loading.get_auth_plugin_conf_options(plugin)
    except exceptions.NoMatchingPlugin:
        return None
    return options


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
                lines.append(
                    "%s: unknown section [%s]%s"
                    % (path, section, " (did you mean [%s]?)" % near if near else "")
                )
                continue
            for name in values:
                if name not in known[section]:
                    near = _nearest(name, known[section])
                    lines.append(
                        "%s: [%s] unknown option %s%s"
                        % (path, section, name, " (did you mean %s?)" % near if near else "")
                    )
    return lines


def is_loopback(host: str) -> bool:
    """True when every address ``host`` names is a loopback address."""
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    addresses = {str(info[4][0]) for info in infos}
    return bool(addresses) and all(
        ipaddress.ip_address(address.split("%", 1)[0]).is_loopback for address in addresses
    )


def parse_listen(value: str, option: str) -> tuple[str, int]:
    """``host:port`` (IPv6 hosts in brackets) as (host, port); ValueError
    naming ``[berth] option`` for anything else."""
    host, sep, port = value.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError("[berth] %s must be host:port, not %r" % (option, value))
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
    if (
        where is not None
        and where.location == cfg.Locations.user
        and where.detail in set(berth_conf.config_files(conf))
    ):
        return
    if berth_conf.is_embedded(conf):
        raise ConfigProblem(
            "refusing to serve the embedded database without authentication "
            "on %s: with no configuration file Berth binds only to a "
            "loopback address (127.0.0.1); to serve the network, write a "
            "placement.conf with [placement_database] connection and [api] "
            "auth_strategy" % host
        )
    raise ConfigProblem(
        "refusing to serve noauth2 (no authentication) on %s: "
        "auth_strategy = noauth2 must be written in a configuration file "
        "to serve beyond a loopback address (it came from %s)" % (host, source)
    )


def check_tls(conf: cfg.ConfigOpts) -> bool:
    """Whether ``berth serve`` serves TLS: True when ``[berth]
    ssl_cert_file`` and ``ssl_key_file`` are set and load (with
    ``ssl_ca_file``, when set). Raises :class:`ConfigProblem` (one line)
    when only one of the two is set, a file cannot be read or is not
    what it should be (a key that does not match the certificate
    included), or a misspelled ``[berth] ssl_`` option: whatever
    ``strict_config`` says, these never become plain HTTP."""
    _tls_misspelled(conf)
    berth = conf.berth
    cert, key, ca = berth.ssl_cert_file, berth.ssl_key_file, berth.ssl_ca_file
    if not (cert or key):
        if ca:
            raise ConfigProblem(
                "[berth] ssl_ca_file is set without ssl_cert_file and "
                "ssl_key_file: refusing to serve plain HTTP"
            )
        return False
    if not (cert and key):
        raise ConfigProblem(
            "[berth] %s is set without %s: TLS needs both (refusing to "
            "serve plain HTTP)"
            % (("ssl_cert_file", "ssl_key_file") if cert else ("ssl_key_file", "ssl_cert_file"))
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _load_tls(
        "ssl_cert_file %s and ssl_key_file %s" % (cert, key), context.load_cert_chain, cert, key
    )
    if ca:
        _load_tls("ssl_ca_file %s" % ca, context.load_verify_locations, ca)
    return True


def _tls_misspelled(conf: cfg.ConfigOpts) -> None:
    """Raise :class:`ConfigProblem` for an unknown ``[berth]`` option
    whose nearest known name is a TLS one: the file meant TLS and would
    get plain HTTP. (oslo.service's ``[ssl]``, which upstream Placement
    never read either, stays a warning: upstream's files start Berth.)"""
    known = {opt.name for opt in berth_conf.berth_opts}
    for path in berth_conf.config_files(conf):
        for name in _read(path).get("berth", {}):
            near = _nearest(name, known)
            if name not in known and near.startswith("ssl_"):
                raise ConfigProblem(
                    "%s: [berth] %s is no option (did you mean %s?): "
                    "refusing to serve plain HTTP where TLS was meant" % (path, name, near)
                )


def _load_tls(what: str, load: Any, *files: str) -> None:
    """``load(*files)``, or :class:`ConfigProblem` saying why not."""
    try:
        load(*files)
        return
    except ssl.SSLError as exc:  # before OSError, its base
        reason = exc.reason or str(exc)
    except OSError as exc:
        reason = exc.strerror or str(exc)
    raise ConfigProblem("[berth] %s: cannot be used for TLS: %s" % (what, reason))


def check_auth(conf: cfg.ConfigOpts) -> None:
    """Raise :class:`ConfigProblem` (one line naming the files and the
    section) when ``auth_strategy = keystone`` and keystonemiddleware
    could not validate a token: no ``[keystone_authtoken]`` (a misspelled
    section), no ``auth_type``, a plugin keystoneauth does not know, or
    one that lacks what it signs in with (``auth_url``; a user and a
    password for the password plugins).

    ``www_authenticate_uri`` is not required: without it keystonemiddleware
    names the plugin's ``auth_url`` in its 401s (and warns at start)."""
    if conf.api.auth_strategy != "keystone":
        return
    group, plugin = _auth_plugin(conf)
    section = "[%s]" % group + ("" if group == AUTHTOKEN else " (auth_section of [%s])" % AUTHTOKEN)
    files = _files_with(conf, group)
    where = _names(conf, files)
    if not plugin:
        raise ConfigProblem(
            "%s: %s %s: with [api] auth_strategy = keystone, "
            "keystonemiddleware needs it to validate tokens (%s)"
            % (where, section, "sets no auth_type" if files else "is missing", AUTHTOKEN_EXAMPLE)
        )
    options = _plugin_options(plugin)
    if options is None:
        near = _nearest(plugin, _plugin_names())
        raise ConfigProblem(
            "%s: %s auth_type = %s is no keystoneauth plugin Berth can load%s"
            % (where, section, plugin, " (did you mean %s?)" % near if near else "")
        )
    conf.register_opts(options, group=group)  # as keystonemiddleware does
    missing = _missing(options, {opt.dest: conf[group][opt.dest] for opt in options})
    if missing:
        raise ConfigProblem(
            "%s: %s auth_type = %s needs %s to sign in to Keystone and "
            "validate tokens" % (where, section, plugin, " and ".join(missing))
        )


def _missing(options: list[Any], values: dict[str, Any]) -> list[str]:
    """What a keystoneauth plugin lacks: its required options, and for
    the password plugins a user and a password (keystoneauth marks
    neither required, but no password plugin signs in without them)."""
    missing = [opt.dest for opt in options if opt.required and values.get(opt.dest) is None]
    if "password" in values:
        if "username" not in missing and not (values.get("username") or values.get("user_id")):
            missing.append("username (or user_id)")
        if "password" not in missing and not values.get("password"):
            missing.append("password")
    return missing


def _files_with(conf: cfg.ConfigOpts, section: str) -> list[str]:
    """The configuration files that have ``[section]``."""
    return [path for path in berth_conf.config_files(conf) if section in _read(path)]


def _names(conf: cfg.ConfigOpts, files: list[str]) -> str:
    """``files``, else every file read, as one line names them."""
    return ", ".join(files or berth_conf.config_files(conf)) or "no configuration file"
