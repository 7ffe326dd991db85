"""Every option Berth reads, as oslo's own tools want them.

``pyproject.toml`` registers these under upstream Placement's entry point
names, so that ``oslo-config-generator --namespace placement`` (a sample
``placement.conf``), ``oslo-config-validator --namespace placement
--input-file placement.conf`` (unknown sections and options, typos
included) and the policy tools work with Berth as they do with upstream:

- ``oslo.config.opts``: ``placement`` lists everything Berth reads, the
  libraries' groups included ([DEFAULT] logging, [oslo_policy], [cors],
  [oslo_middleware], [healthcheck], [keystone_authtoken] with the password
  plugin's options), so the validator alone checks a whole file; ``placement.conf`` (upstream's
  name) lists Berth's own groups only, as upstream's does.
- ``oslo.config.opts.defaults``: :func:`set_defaults`.

The same list is what ``berth`` checks a configuration file against when
it starts (``berth.conf.check``).
"""

from __future__ import annotations

from typing import Any

from oslo_config import cfg

from berth import conf as berth_conf

#: (group, options) pairs, as oslo.config's entry points return them.
OptList = list[tuple[str, list[Any]]]

#: The keystoneauth plugin whose options [keystone_authtoken] lists; the
#: one upstream's install guide and deployment tools configure.
AUTH_PLUGIN = "password"


def list_own_opts() -> OptList:
    """Berth's own groups (upstream's ``placement.conf`` namespace)."""
    return [
        ("placement_database", list(berth_conf.database_opts)),
        ("api", list(berth_conf.api_opts)),
        ("placement", list(berth_conf.placement_opts)),
        ("berth", list(berth_conf.berth_opts)),
    ]


def list_opts(plugin: str | None = AUTH_PLUGIN) -> OptList:
    """Every option Berth reads, by group (the ``placement`` namespace),
    with [keystone_authtoken] listing keystoneauth ``plugin``'s options."""
    from oslo_log import _options as log_options  # oslo.log's entry point
    from oslo_middleware import cors, http_proxy_to_wsgi
    from oslo_middleware.healthcheck import opts as healthcheck_opts
    from oslo_policy import opts as policy_opts

    found = list_own_opts()
    found += [("DEFAULT", [opt for _, opts in log_options.list_opts() for opt in opts])]
    found += [(group, list(opts)) for group, opts in policy_opts.list_opts()]
    found += [("oslo_policy", [berth_conf.ENFORCE_SCOPE])]
    found += [
        ("cors", list(cors.CORS_OPTS)),
        ("oslo_middleware", list(http_proxy_to_wsgi.OPTS)),
        ("healthcheck", list(healthcheck_opts.HEALTHCHECK_OPTS)),
        ("keystone_authtoken", auth_token_opts(plugin)),
    ]
    return _merged(found)


def auth_token_opts(plugin: str | None) -> list[Any]:
    """keystonemiddleware's [keystone_authtoken] options, with those of
    keystoneauth ``plugin`` (``auth_type``), if any."""
    from keystoneauth1 import loading
    from keystonemiddleware import opts as ks_opts

    found = [opt for _, opts in ks_opts.list_auth_token_opts() for opt in opts]
    if plugin:
        try:
            found += loading.get_auth_plugin_conf_options(plugin)
        except Exception:  # noqa: BLE001 - an unknown plugin adds nothing
            pass
    names = {opt.dest for opt in found}
    return found + [opt for opt in loading.get_session_conf_options() if opt.dest not in names]


def _merged(found: OptList) -> OptList:
    """One entry per group, each option once, groups in first-seen order."""
    groups: dict[str, dict[str, Any]] = {}
    for group, opts in found:
        kept = groups.setdefault(group, {})
        for opt in opts:
            kept.setdefault(opt.dest, opt)
    return [(group, list(opts.values())) for group, opts in groups.items()]


def set_defaults() -> None:
    """Berth's defaults for the libraries' options (the generator's
    ``oslo.config.opts.defaults`` hook): the /healthcheck database check
    on, [oslo_policy]'s secure defaults and Berth's quieter log levels."""
    from oslo_middleware.healthcheck import opts as healthcheck_opts
    from oslo_policy import opts as policy_opts

    from berth import logs

    cfg.set_defaults(healthcheck_opts.HEALTHCHECK_OPTS, backends=[berth_conf.HEALTHCHECK_BACKEND])
    cfg.set_defaults(policy_opts._options, **berth_conf.POLICY_DEFAULTS)
    logs.set_defaults()
