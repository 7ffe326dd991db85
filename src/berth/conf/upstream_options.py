"""The groups of upstream Placement's own ``placement.conf``:
``[placement_database]``, ``[api]`` and ``[placement]``, with upstream's
names and defaults (``berth.conf`` registers them)."""

from __future__ import annotations

from oslo_config import cfg

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
