"""Prometheus metrics: every metric object Berth has, owned by one
``Metrics`` in each application's state.

Each application makes its own registry, so tests and several apps in one
process never collide. Under ``berth serve`` the workers are separate
processes: prometheus-client's multiprocess mode (the
``PROMETHEUS_MULTIPROC_DIR`` environment variable, which ``berth serve``
sets to a directory of its own) keeps each process's values in files
there, and ``exposition()`` adds them up across processes, living or
dead. docs/operations.md lists every metric with its meaning.
"""

from __future__ import annotations

import os
from typing import Any

import prometheus_client as prom
from prometheus_client import multiprocess

from berth.domain.allocation_candidate.cache import Refresh

#: Routes whose writes are claims (allocations made, moved or dropped).
CLAIM_ROUTES = {
    ("PUT", "/allocations/{consumer_uuid}"),
    ("POST", "/allocations"),
    ("DELETE", "/allocations/{consumer_uuid}"),
}

#: Methods kept as labels; any other (a client can send anything) is
#: counted as OTHER, so that no caller can make series without bound.
METHODS = frozenset(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"])

_LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
#: The change feed's delivery delay: a few ms when idle, up to seconds
#: when thousands of watchers wait for a share of a core.
_DELIVERY = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.25,
    0.3,
    0.4,
    0.5,
    0.75,
    1,
    1.5,
    2,
    3,
    5,
)
_COUNTS = (0, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 10000)


def multiprocess_dir() -> str | None:
    """The multiprocess directory in use, if any."""
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


class Metrics:
    """The metric objects, and the hooks that feed them."""

    def __init__(self) -> None:
        self.registry = prom.CollectorRegistry(auto_describe=True)
        self._add_request_metrics(self.registry)
        self._add_database_metrics(self.registry)
        self._add_world_metrics(self.registry)
        self._add_worker_metrics(self.registry)
        self._add_feed_metrics(self.registry)
        self.db = _DatabaseMetrics(self)
        # labels() builds and locks on every call; requests repeat a few
        # hundred label sets, so their children are kept here.
        self._request_children: dict[tuple[str, str, str, str], tuple[Any, Any]] = {}

    def _add_request_metrics(self, r: prom.CollectorRegistry) -> None:
        """Requests, conflicts and claims, by route."""
        self.requests = prom.Counter(
            "berth_requests",
            "HTTP requests answered.",
            ["route", "method", "status", "microversion"],
            registry=r,
        )
        self.request_seconds = prom.Histogram(
            "berth_request_duration_seconds",
            "Time to answer an HTTP request (until the body is ready).",
            ["route", "method"],
            buckets=_LATENCY,
            registry=r,
        )
        self.conflicts = prom.Counter(
            "berth_conflicts", "409 answers, by error code.", ["code"], registry=r
        )
        self.claims = prom.Counter(
            "berth_claims",
            "Allocation writes (PUT/POST/DELETE on /allocations), by outcome.",
            ["method", "outcome"],
            registry=r,
        )

    def _add_database_metrics(self, r: prom.CollectorRegistry) -> None:
        """Connections, retried transactions and SQL statements."""
        self.db_connections = prom.Gauge(
            "berth_db_connections_in_use",
            "Database connections checked out now.",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.db_retries = prom.Counter(
            "berth_db_transaction_retries",
            "Transactions run again after a deadlock, serialization failure or lock time-out.",
            registry=r,
        )
        # Counters, not a histogram: they cost less per statement, and
        # rate(seconds) / rate(statements) still gives the mean.
        self.sql_seconds = prom.Counter(
            "berth_db_sql_seconds", "Time spent executing SQL statements.", registry=r
        )
        self.sql_statements = prom.Counter(
            "berth_db_sql_statements", "SQL statements executed.", registry=r
        )

    def _add_world_metrics(self, r: prom.CollectorRegistry) -> None:
        """The candidate cache's world and the searches over it."""
        self.world_providers = prom.Gauge(
            "berth_world_providers",
            "Providers in the candidate cache's world (largest across workers).",
            registry=r,
            multiprocess_mode="livemax",
        )
        self.world_classes = prom.Gauge(
            "berth_world_resource_classes",
            "Resource classes known to the candidate cache's world.",
            registry=r,
            multiprocess_mode="livemax",
        )
        self.world_refresh_seconds = prom.Histogram(
            "berth_world_refresh_duration_seconds",
            "Refreshes of the candidate cache: kind=whole (loaded whole), "
            "providers (some providers re-read) or usage (usage re-read).",
            ["kind"],
            buckets=_LATENCY,
            registry=r,
        )
        self.world_lag = prom.Histogram(
            "berth_world_lag_changes",
            "How many changes behind the "
            "database the candidate cache was when a request refreshed it.",
            buckets=_COUNTS,
            registry=r,
        )
        self.trees_searched = prom.Histogram(
            "berth_candidate_trees_searched",
            "Search steps of one allocation-candidates query: the trees the search visited.",
            buckets=_COUNTS,
            registry=r,
        )
        self.candidates = prom.Histogram(
            "berth_candidates_returned",
            "Allocation requests in one allocation-candidates answer.",
            buckets=_COUNTS,
            registry=r,
        )
        self.cut = prom.Counter(
            "berth_candidates_cut_by_limit",
            "Allocation-candidates answers that `limit` cut short.",
            registry=r,
        )
        self.by_order = prom.Counter(
            "berth_candidates_answers_by_order",
            "Allocation-candidates answers, by the order they came in "
            "(uuid, random, spread, pack).",
            ["order"],
            registry=r,
        )

    def _add_worker_metrics(self, r: prom.CollectorRegistry) -> None:
        """Workers' private memory and their replacement."""
        self.worker_private_bytes = prom.Gauge(
            "berth_worker_private_memory_bytes",
            "Resident memory the "
            "workers do not share with the master or each other (summed "
            "over the live workers; read every few seconds).",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.worker_recycles = prom.Counter(
            "berth_worker_recycles",
            "Workers that exited, to be "
            "replaced by a fresh fork of the master's world, because "
            "their private memory passed [berth] worker_private_memory.",
            registry=r,
        )

    def _add_feed_metrics(self, r: prom.CollectorRegistry) -> None:
        """The change feed's watch server (``berth.serve.watch``)."""
        self.feed_watchers = prom.Gauge(
            "berth_feed_watchers",
            "Watches of the change feed following the live stream now.",
            registry=r,
            multiprocess_mode="livesum",
        )
        self.feed_events = prom.Counter(
            "berth_feed_events_sent",
            "Events the change feed's watch sent, counted once per watcher that got them.",
            registry=r,
        )
        self.feed_delivery = prom.Histogram(
            "berth_feed_delivery_seconds",
            "Time from the earliest event "
            "of a batch a group of watchers got (its stored time) until the "
            "feed had written the batch to every watcher of the group "
            "(non-blocking writes to their connections; not their "
            "reading). One observation per group per batch.",
            buckets=_DELIVERY,
            registry=r,
        )

    def request(
        self, route: str, method: str, status: str, microversion: str, seconds: float
    ) -> None:
        """Note one answered request."""
        if method not in METHODS:
            method = "OTHER"
        key = (route, method, status, microversion)
        children = self._request_children.get(key)
        if children is None:
            children = self._request_children[key] = (
                self.requests.labels(*key),
                self.request_seconds.labels(route, method),
            )
        children[0].inc()
        children[1].observe(seconds)
        if (method, route) in CLAIM_ROUTES:
            outcome = (
                "ok" if status.startswith("2") else "conflict" if status == "409" else "refused"
            )
            self.claims.labels(method, outcome).inc()

    def conflict(self, code: str) -> None:
        self.conflicts.labels(code).inc()

    def world_refreshed(self, done: Refresh) -> None:
        """A candidate-cache observer."""
        self.world_refresh_seconds.labels(done.kind).observe(done.seconds)
        self.world_lag.observe(done.behind)
        world = done.cached.world
        self.world_providers.set(len(world.providers))
        self.world_classes.set(len(done.cached.classes))

    def candidates_answered(
        self, count: int, trees: int, *, cut: bool, order: str = "uuid"
    ) -> None:
        self.by_order.labels(order).inc()
        self.candidates.observe(count)
        self.trees_searched.observe(trees)
        if cut:
            self.cut.inc()

    def exposition(self) -> bytes:
        """Every metric in the Prometheus text format: this registry's, or
        in multiprocess mode every process's, added up."""
        folder = multiprocess_dir()
        if folder is None:
            return prom.generate_latest(self.registry)
        return prom.generate_latest(multiprocess_registry(folder))


def multiprocess_registry(folder: str) -> prom.CollectorRegistry:
    """A registry reading every process's values in ``folder``."""
    registry = prom.CollectorRegistry()
    multiprocess.MultiProcessCollector(  # type: ignore[no-untyped-call]
        registry, path=folder
    )
    return registry


class _DatabaseMetrics:
    """The database layer's ``Observer``."""

    def __init__(self, metrics: Metrics) -> None:
        self.m = metrics

    def connections_in_use(self, count: int) -> None:
        self.m.db_connections.set(count)

    def transaction_retried(self) -> None:
        self.m.db_retries.inc()

    def sql_time(self, seconds: float, statements: int) -> None:
        self.m.sql_seconds.inc(seconds)
        self.m.sql_statements.inc(statements)
