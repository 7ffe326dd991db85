"""Configuration: the options of upstream Placement's ``placement.conf``.

Option names, groups and defaults follow upstream so that an operator's
existing file works unchanged. Options Berth adds live in ``[berth]``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from oslo_config import cfg

# The options of each group live in a module of their own; they are
# re-exported here, where callers have always found them.
from berth.conf.berth_options import berth_opts as berth_opts
from berth.conf.upstream_options import NIL_UUID as NIL_UUID
from berth.conf.upstream_options import api_opts as api_opts
from berth.conf.upstream_options import database_opts as database_opts
from berth.conf.upstream_options import placement_opts as placement_opts

LOG = logging.getLogger(__name__)

PROJECT = "placement"
#: oslo.policy 6 dropped ``enforce_scope`` (scope is always checked);
#: upstream's files still set it, so Berth keeps honouring it.
ENFORCE_SCOPE = cfg.BoolOpt(
    "enforce_scope", default=True, help="Reject tokens whose scope a rule does not allow."
)

#: [oslo_policy] defaults as oslo.policy 4.4 and later set them.
POLICY_DEFAULTS = {"enforce_scope": True, "enforce_new_defaults": True}

#: The entry point name of the /healthcheck database backend.
HEALTHCHECK_BACKEND = "berth_database"


def register_opts(conf: cfg.ConfigOpts) -> None:
    """Register every option Berth reads on ``conf`` (idempotent)."""
    conf.register_opts(database_opts, group="placement_database")
    conf.register_opts(api_opts, group="api")
    conf.register_opts(placement_opts, group="placement")
    conf.register_opts(berth_opts, group="berth")
    # [DEFAULT] debug, log_file, use_json, ...: oslo.log's, as upstream.
    from berth import logs

    logs.register_opts(conf)
    # oslo.policy's and oslo.middleware's groups are registered by those
    # libraries; registering the policy group here lets `berth` read it
    # before any enforcer exists.
    from oslo_policy import opts as policy_opts

    policy_opts._register(conf)
    if "enforce_scope" not in conf.oslo_policy:
        conf.register_opt(ENFORCE_SCOPE, group="oslo_policy")
    # oslo.policy before 4.4 defaults both to False; Berth's defaults are
    # the secure ones (docs/config-reference.md) whatever the release.
    for name, value in POLICY_DEFAULTS.items():
        conf.set_default(name, value, group="oslo_policy")
    from oslo_middleware import cors, http_proxy_to_wsgi

    conf.register_opts(cors.CORS_OPTS, group="cors")
    # [oslo_middleware] enable_proxy_headers_parsing, read by the
    # HTTPProxyToWSGI middleware (berth.api.app) as upstream's pipeline
    # reads it.
    conf.register_opts(http_proxy_to_wsgi.OPTS, group="oslo_middleware")
    # oslo.middleware's [healthcheck], with Berth's database check on by
    # default (the ``oslo.middleware.healthcheck`` entry point named
    # HEALTHCHECK_BACKEND in pyproject.toml, berth.api.healthcheck_middleware).
    from oslo_middleware.healthcheck import opts as healthcheck_opts

    conf.register_opts(healthcheck_opts.HEALTHCHECK_OPTS, group="healthcheck")
    conf.set_default("backends", [HEALTHCHECK_BACKEND], group="healthcheck")
    # [keystone_authtoken] is keystonemiddleware's; registering it here
    # lets it be read (and validated) before the middleware is built.
    from keystonemiddleware import opts as ks_opts

    for group, options in ks_opts.list_auth_token_opts():
        conf.register_opts(options, group=group)


def config_files_from_env(env: dict[str, str] | None = None) -> list[str] | None:
    """Files named by ``OS_PLACEMENT_CONFIG_DIR``, as upstream reads them."""
    env = dict(os.environ) if env is None else env
    dirname = env.get("OS_PLACEMENT_CONFIG_DIR", "").strip()
    if not dirname:
        return None
    return [os.path.join(dirname, "placement.conf")]


def load(
    args: Sequence[str] = (),
    default_config_files: list[str] | None = None,
    default_config_dirs: list[str] | None = None,
) -> cfg.ConfigOpts:
    """Build a fresh ``ConfigOpts`` from command-line style ``args``.

    ``--config-file`` and ``--config-dir`` are understood as oslo.config
    understands them. Without either, ``OS_PLACEMENT_CONFIG_DIR`` is
    honoured, then oslo.config's usual search for ``placement.conf``.
    """
    conf = cfg.ConfigOpts()
    register_opts(conf)
    if default_config_files is None:
        default_config_files = config_files_from_env()
    conf(
        list(args),
        project=PROJECT,
        validate_default_values=True,
        default_config_files=default_config_files,
        default_config_dirs=default_config_dirs,
    )
    validate(conf)
    return conf


def validate(conf: cfg.ConfigOpts) -> None:
    """Read every option once, so that a bad value fails now, naming its
    option, and not later inside each worker.

    Raises ValueError("[group] option: what is wrong").
    """

    def check(group: str, name: str, read: object) -> object:
        try:
            return read[name]  # type: ignore[index]
        except (cfg.Error, ValueError) as exc:
            reason = str(exc).split(" is not valid: ", 1)[-1].splitlines()[0]
            raise ValueError("[%s] %s: %s" % (group, name, reason)) from None

    for name in list(conf):
        value = check("DEFAULT", name, conf)
        if isinstance(value, cfg.ConfigOpts.GroupAttr):
            for opt in list(value):
                check(name, opt, value)


def data_dir(conf: cfg.ConfigOpts) -> Path:
    """Where the embedded SQLite database lives."""
    if conf.berth.data_dir:
        return Path(conf.berth.data_dir)
    if os.environ.get("BERTH_DATA_DIR"):
        return Path(os.environ["BERTH_DATA_DIR"])
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "berth"


def config_files(conf: cfg.ConfigOpts) -> list[str]:
    """The configuration files ``conf`` read, in order (``--config-file``,
    oslo.config's search, and the ``*.conf`` of each ``--config-dir``)."""
    files = list(conf.config_file or [])
    for folder in conf.config_dir or []:
        files += sorted(str(p) for p in Path(folder).glob("*.conf"))
    return files


def database_url(conf: cfg.ConfigOpts) -> str:
    """The SQLAlchemy URL to use: the configured connection, or the
    embedded SQLite file when no configuration file was read at all.

    Raises ValueError (one line naming the files) when configuration
    files were read and none sets ``[placement_database] connection``:
    a typo must never turn into an empty, open database.
    """
    url: str = conf.placement_database.connection or ""
    files = [] if url else config_files(conf)
    if files:
        raise ValueError(
            "%s: [placement_database] connection is not set (Berth uses its "
            "embedded SQLite database only when no configuration file is "
            "read)" % ", ".join(files)
        )
    if not url:
        folder = data_dir(conf)
        folder.mkdir(parents=True, exist_ok=True)
        url = "sqlite:///%s" % (folder / "placement.sqlite")
    extra = conf.placement_database.connection_parameters
    if extra:
        url += ("&" if "?" in url else "?") + extra
    return url


def is_embedded(conf: cfg.ConfigOpts) -> bool:
    """True in local, single-user mode: no configuration file was read,
    so no database was configured."""
    return not conf.placement_database.connection and not config_files(conf)
