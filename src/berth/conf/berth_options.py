"""The ``[berth]`` group: the options Berth adds to upstream's
``placement.conf`` (``berth.conf`` registers them)."""

from __future__ import annotations

from oslo_config import cfg, types

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
