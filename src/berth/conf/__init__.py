"""Configuration: the options of upstream Placement's ``placement.conf``.

Option names, groups and defaults follow upstream so that an operator's
existing file works unchanged. Options Berth adds live in ``[berth]``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path

from oslo_config import cfg, types

LOG = logging.getLogger(__name__)

PROJECT = "placement"
#: A nil UUID, as upstream uses for consumers written before 1.8.
NIL_UUID = "00000000-0000-0000-0000-000000000000"

database_opts = [
    cfg.StrOpt(
        "connection",
        secret=True,
        help="SQLAlchemy URL of the Placement database. Unset means "
        "an embedded SQLite file under [berth] data_dir.",
    ),
    cfg.StrOpt(
        "connection_parameters",
        default="",
        help="Extra query parameters appended to the connection URL.",
    ),
    cfg.BoolOpt(
        "sqlite_synchronous",
        default=True,
        help="If False, SQLite does not sync the disk at each "
        "commit (synchronous=NORMAL): a power loss may undo "
        "the last commits, but does not corrupt the file.",
    ),
    cfg.StrOpt(
        "slave_connection",
        secret=True,
        help="Accepted for compatibility; Berth reads from the primary connection.",
    ),
    cfg.StrOpt(
        "mysql_sql_mode", default="TRADITIONAL", help="SQL mode set on every MySQL connection."
    ),
    cfg.IntOpt(
        "connection_recycle_time",
        default=3600,
        help="Seconds after which a pooled connection is replaced.",
    ),
    cfg.IntOpt("max_pool_size", default=5, help="Connections kept open in each worker's pool."),
    cfg.IntOpt(
        "max_retries", default=10, help="Connection attempts at start-up (-1 means forever)."
    ),
    cfg.IntOpt(
        "retry_interval", default=10, help="Seconds between connection attempts at start-up."
    ),
    cfg.IntOpt(
        "max_overflow", default=50, help="Connections a pool may open beyond max_pool_size."
    ),
    cfg.IntOpt(
        "connection_debug",
        default=0,
        min=0,
        max=100,
        help="SQL logging: 0 none, 50 and above logs statements.",
    ),
    cfg.BoolOpt(
        "connection_trace", default=False, help="Accepted for compatibility; has no effect."
    ),
    cfg.IntOpt("pool_timeout", default=30, help="Seconds to wait for a pooled connection."),
    cfg.BoolOpt(
        "sync_on_startup",
        default=False,
        help="Run the database migrations when the service starts.",
    ),
]

api_opts = [
    cfg.StrOpt(
        "auth_strategy",
        default="keystone",
        choices=[
            ("keystone", "Use keystonemiddleware tokens"),
            ("noauth2", "Trust X-Auth-Token user:project; for testing only"),
        ],
        help="How incoming requests are authenticated.",
    ),
]

placement_opts = [
    cfg.BoolOpt(
        "randomize_allocation_candidates",
        default=False,
        help="Return allocation candidates in a random order ([berth] candidate_order = random).",
    ),
    cfg.StrOpt(
        "incomplete_consumer_project_id",
        default=NIL_UUID,
        help="Project recorded for consumers written without one (microversions before 1.8).",
    ),
    cfg.StrOpt(
        "incomplete_consumer_user_id",
        default=NIL_UUID,
        help="User recorded for consumers written without one (microversions before 1.8).",
    ),
    cfg.IntOpt(
        "allocation_conflict_retry_count",
        default=10,
        min=0,
        help="Times an allocation write is retried inside one "
        "request when a provider generation moves under it.",
    ),
    cfg.IntOpt(
        "max_allocation_candidates",
        default=-1,
        min=-1,
        help="Upper bound on candidates generated per request; -1 means no bound.",
    ),
    cfg.StrOpt(
        "allocation_candidates_generation_strategy",
        default="depth-first",
        choices=[
            ("depth-first", "Exhaust one root before the next"),
            ("breadth-first", "Take candidates from every root in turn"),
        ],
        help="Order in which candidates are generated when max_allocation_candidates bounds them.",
    ),
]

berth_opts = [
    cfg.StrOpt(
        "data_dir",
        help="Folder of the embedded SQLite database when "
        "[placement_database] connection is unset. Default: "
        "$BERTH_DATA_DIR, else $XDG_DATA_HOME/berth, else "
        "~/.local/share/berth.",
    ),
    cfg.IntOpt(
        "max_body_bytes",
        default=10 * 1024 * 1024,
        min=1024,
        help="Largest request body accepted; larger gets 413.",
    ),
    cfg.IntOpt(
        "max_json_depth", default=32, min=4, help="Deepest JSON nesting accepted in a request body."
    ),
    cfg.BoolOpt("request_log", default=True, help="Log one line per request."),
    cfg.BoolOpt(
        "strict_config",
        default=False,
        help="Refuse to start when a configuration file has a "
        "section or option Berth does not read (a misspelled "
        "name, say). Off: each is logged as a warning, with "
        "the nearest known name, and the rest of the file "
        "applies. Off by default, configuration file or not: "
        "the placement.conf that deployment tools write for "
        "upstream also sets what Placement never reads "
        "([oslo_concurrency], [oslo_messaging_notifications], "
        "[DEFAULT] state_path), upstream "
        "starts with it, and so must its drop-in. The "
        "misspellings that would change what Berth serves "
        "are refused whatever this says: a file without "
        "[placement_database] connection, [api] "
        "auth_strategy = keystone without a keystone_authtoken "
        "section that can validate tokens, and (for `berth "
        "serve`) a [berth] option misspelled from a TLS one "
        "(ssl_certfile).",
    ),
    cfg.StrOpt(
        "metrics_listen",
        help="host:port on which `berth serve` also serves the "
        "Prometheus metrics (GET /metrics), without "
        "authentication, for a Prometheus server. Unset: "
        "metrics are only on the API port, for admins.",
    ),
    cfg.BoolOpt(
        "candidate_cache",
        default=True,
        help="Keep the providers, inventories, usage, traits and "
        "aggregates that allocation-candidate and provider "
        "queries search (and the rows of filtered provider "
        "listings and /usages answers) in each worker's "
        "memory, refreshed "
        "from a change sequence that every Berth write "
        "bumps. Turn off only while something other than "
        "Berth (upstream Placement, hand-written SQL) writes "
        "the same database: every such query then reads the "
        "database whole.",
    ),
    cfg.IntOpt(
        "candidate_memo",
        default=20000,
        min=0,
        help="How many allocation candidates each worker keeps, "
        "per request shape and tree, to answer the next "
        "request of the same shape without searching the "
        "trees that have not changed since (about 1.5 KB "
        "each, encoded answer included). A host that is a "
        "tree of its own is kept on its provider, outside "
        "this budget (one entry per host, for one shape at a "
        "time). 0 keeps none.",
    ),
    cfg.StrOpt(
        "candidate_order",
        default="uuid",
        choices=[
            (
                "uuid",
                "Tree by tree in root provider uuid order (upstream's order is by database id)",
            ),
            (
                "random",
                "Trees in a random order drawn per "
                "request, each tree's candidates "
                "shuffled, as "
                "randomize_allocation_candidates",
            ),
            ("spread", "Trees with the most free capacity first, by candidate_order_weights"),
            ("pack", "Trees with the least free capacity first, by candidate_order_weights"),
        ],
        help="The order of GET /allocation_candidates answers, so "
        "that with limit the best trees are the ones "
        'returned (docs/allocation-candidates.md, "Order"). '
        "In spread and pack, trees of equal score come in a "
        "random order per request. [placement] "
        "randomize_allocation_candidates = true means random "
        "where this is uuid.",
    ),
    cfg.Opt(
        "candidate_order_weights",
        type=types.Dict(value_type=types.Float()),
        default={"DISK_GB": 1.0, "MEMORY_MB": 1.0, "VCPU": 1.0},
        help="class:weight pairs: in the spread and pack orders, a "
        "tree's score adds, per class, the weight times the "
        "share of the tree's capacity of that class that is "
        "free (spread) or used (pack), as Nova's RAM, CPU and "
        "disk weighers weigh hosts.",
    ),
    cfg.BoolOpt(
        "candidate_hosts_first",
        default=True,
        help="When limit cuts an allocation-candidates answer, "
        "each tree's (host's) first candidate comes before "
        "any tree's second, in every candidate_order, so "
        "that a scheduler asking for max_placement_results "
        "sees as many hosts as the limit allows rather than "
        "permutations of equivalent devices on one. False: "
        "tree by tree (all of one tree's candidates before "
        "the next tree's). Does not apply when "
        "[placement] max_allocation_candidates bounds the "
        "search: allocation_candidates_generation_strategy "
        "decides then, as upstream.",
    ),
    cfg.Opt(
        "candidate_order_preferences",
        type=types.Dict(value_type=types.Float()),
        default={"COMPUTE_STATUS_DISABLED": -10.0},
        help="trait:weight pairs: in the spread and pack orders, a "
        "tree with a provider that has the trait adds the "
        "weight to its score: positive for preferred traits, "
        "negative for discouraged ones. The default sends "
        "disabled compute hosts (COMPUTE_STATUS_DISABLED, "
        "which Nova's pre-filter drops anyway) to the back; "
        "set it empty (candidate_order_preferences =) to "
        "rank them like any other host.",
    ),
    cfg.IntOpt(
        "worker_private_memory",
        min=0,
        help="MiB of private memory after which a `berth serve` "
        "worker finishes its request and exits, and the "
        "master, having brought its own copy of the world up "
        "to date, forks a replacement that shares that copy. "
        "Private memory is what a worker no longer shares "
        "with the master: the pages of the world it touched "
        "(CPython writes a reference count into every object "
        "it reads), the index entries it patched or rebuilt "
        "after structural changes, a world it loaded whole, "
        "and its own memos. Checked every few seconds on "
        "Linux. Unset: a third of what the worker shares with "
        "the master when it starts, and at least 64 MiB: "
        "above what serving copies in steady use, and eight "
        "workers at the limit hold less than three times what "
        "one does. 0: workers are never replaced for their "
        "memory. Only with the candidate cache on (a master "
        "that holds the world).",
    ),
    cfg.IntOpt(
        "worker_timeout",
        default=120,
        min=0,
        help="Seconds a `berth serve` worker may stay silent (one "
        "request taking that long, or a worker stuck) before "
        "the master kills it and forks a replacement; the "
        "request gets no answer. Above the slowest request "
        "you serve (a large allocation-candidates query, a "
        "whole load of the world by a worker) and below the "
        "proxy's own timeout in front of Berth. 0: never.",
    ),
    cfg.StrOpt(
        "ssl_cert_file",
        help="PEM certificate (with its chain) that `berth serve` "
        "presents: set with ssl_key_file, the API is served "
        "over TLS only. Setting one of the two without the "
        "other, or a file that cannot be read, stops `berth "
        "serve` at start: it never falls back to plain HTTP "
        "(nor for a misspelled ssl_ option). oslo.service's "
        "[ssl] cert_file is not read (nor by upstream under "
        "uWSGI). Other WSGI servers (berth.wsgi) use their "
        "own TLS settings.",
    ),
    cfg.StrOpt("ssl_key_file", help="PEM private key of ssl_cert_file (unencrypted)."),
    cfg.StrOpt(
        "ssl_ca_file",
        help="PEM certificates of the authorities that sign client "
        "certificates: set, `berth serve` (with ssl_cert_file "
        "and ssl_key_file) accepts only clients that present "
        "a certificate one of them signed (mutual TLS). "
        "Unset: no client certificate is asked for.",
    ),
    cfg.StrOpt(
        "watch_listen",
        help="host:port on which `berth serve` serves the change "
        "feed's watch form (GET /berth/changes/watch, "
        "docs/change-feed.md) from its own process, with the "
        "API's authentication, say 127.0.0.1:8779 beside an "
        "API on 127.0.0.1:8778. Unset or empty: no watch "
        "listener (a port nobody asked for is never taken). "
        "A bad value, or a port in use, stops `berth serve` "
        "at start.",
    ),
    cfg.IntOpt(
        "change_feed_retention",
        default=86400,
        min=0,
        help="Seconds the change feed (GET /berth/changes) keeps "
        "the events of each write. Older events are pruned "
        "every 512 writes; a reader asking for events after "
        "a position older than the kept history gets 410 "
        "with the oldest position kept, and lists again. "
        "Events cost about 200 bytes each (an allocation "
        "write's more with many providers).",
    ),
    cfg.FloatOpt(
        "watch_drain_timeout",
        default=30.0,
        min=0,
        help="Seconds a change feed watch's connection may keep "
        "bytes its client has not read: once the feed has "
        "ended the stream (a client too slow to keep up, "
        "the history pruned, the server stopping), and for "
        "each write while a watcher catches up on history. "
        "Past it, the connection is closed at once, what "
        "was not read dropped (the client resumes from "
        "the last position it read), so that a client that "
        "stopped reading holds no socket and no buffer "
        "(up to 1 MiB) for ever.",
    ),
]


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
