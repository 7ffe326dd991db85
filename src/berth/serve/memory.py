"""Memory of a serving process: the garbage collector's settings, and
workers replaced for their private memory.

The workers share the world the master loaded (``berth.serve.preload``)
only until they touch it: CPython writes a reference count into every
object a request reads, so each page of the world a worker reads becomes
its own copy, and a structural change makes each worker rebuild the
world's indexes privately. ``Recycler`` (gunicorn's ``post_request``) reads
a worker's private memory every ``MEMORY_CHECK_SECONDS``; past ``[berth]
worker_private_memory`` the worker finishes its request and exits, and
the master brings its own world up to date before it forks the
replacement (``pre_fork``: ``preload.refresh``), which shares it again.

Nothing here imports gunicorn: ``berth.wsgi`` (uwsgi, mod_wsgi) uses
``tune_gc`` too.
"""

from __future__ import annotations

import gc
import logging
import time
from collections.abc import Callable
from typing import Any

from berth.domain.allocation_candidate.cache import Refresh, RefreshObserver

LOG = logging.getLogger("berth.server")

#: Seconds between two readings of a worker's private memory (a reading
#: walks the process's page tables, which grow with the world).
MEMORY_CHECK_SECONDS = 5.0
#: The least automatic ``[berth] worker_private_memory``, MiB: below it a
#: worker's own memos and buffers alone would make it churn.
MIN_PRIVATE_MEMORY = 64
_MIB = 1024 * 1024


def memory() -> tuple[int, int] | None:
    """This process's resident memory in bytes: (private, shared with
    other processes); None where Linux's ``/proc/self/smaps_rollup`` is
    not."""
    try:
        with open("/proc/self/smaps_rollup", encoding="ascii") as f:
            text = f.read()
    except OSError:
        return None
    kib: dict[str, int] = {}
    for line in text.splitlines():
        key, _, rest = line.partition(":")
        fields = rest.split()
        if len(fields) == 2 and fields[1] == "kB":
            kib[key] = int(fields[0])
    return (
        (kib.get("Private_Clean", 0) + kib.get("Private_Dirty", 0)) * 1024,
        (kib.get("Shared_Clean", 0) + kib.get("Shared_Dirty", 0)) * 1024,
    )


class Recycler:
    """gunicorn's ``post_request`` hook: a worker whose private memory
    passes the limit finishes this request and exits (gunicorn's master
    then forks a fresh one).

    ``limit_mib`` None sets the limit at the first reading in each worker:
    a third of what it shares then (S: the master's world and modules),
    at least ``MIN_PRIVATE_MEMORY``. Eight workers at the limit hold
    S + 8·S/3, under three times the S + S/3 of one worker at it; what
    serving copies in steady use stays well below S/3 (measured at 50,000
    hosts: bench/journal/2026-12-01.md, "Memory under a scheduler's
    workload"), so workers are replaced for what accumulates: a
    whole load, patched indexes, hours of claims. One instance is made in
    the master; each forked worker has its own copy of its state.
    """

    def __init__(
        self,
        limit_mib: int | None,
        every: float = MEMORY_CHECK_SECONDS,
        read: Callable[[], tuple[int, int] | None] = memory,
    ) -> None:
        self.limit_mib = limit_mib
        self.every = every
        self.read = read
        #: bytes, once known in this worker
        self.limit: int | None = None
        self._next = 0.0

    def __call__(self, worker: Any, req: Any = None, environ: Any = None, resp: Any = None) -> None:
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self.every
        found = self.read()
        if found is None:
            self._next = float("inf")  # not Linux: nothing to read
            return
        private, shared = found
        if self.limit is None:
            self.limit = (
                self.limit_mib * _MIB
                if self.limit_mib
                else max(MIN_PRIVATE_MEMORY * _MIB, shared // 3)
            )
        metrics = getattr(getattr(getattr(worker, "wsgi", None), "state", None), "metrics", None)
        if metrics is not None:
            metrics.worker_private_bytes.set(private)
        if private > self.limit and worker.alive:
            LOG.info(
                "worker %s: %d MiB of private memory is over the "
                "limit of %d MiB ([berth] worker_private_memory): "
                "exiting after this request; the master forks a "
                "replacement that shares its world",
                worker.pid,
                private // _MIB,
                self.limit // _MIB,
            )
            worker.alive = False
            if metrics is not None:
                metrics.worker_recycles.inc()


def tune_gc() -> RefreshObserver:
    """Garbage-collector settings for a process that serves requests:
    rarer young collections now, and the returned cache observer, which
    after each whole load of the candidate cache collects once and moves
    every live object out of the collector's view (``gc.freeze``), so that
    requests that build thousands of objects do not make the collector
    walk the world again and again, which cost large candidate answers
    much of their CPU (bench/journal/2026-11-29.md, "Where Berth's time
    goes"). (Freezing never stops reference counting from
    freeing an old world.)"""
    gc.set_threshold(5000, 20, 20)
    return _freeze_after_whole_load


def _freeze_after_whole_load(done: Refresh) -> None:
    if done.kind == "whole" and done.kept:
        # Unfreeze first: whatever was frozen last time and has since
        # become cyclic garbage is collected now, not kept for ever.
        gc.unfreeze()
        gc.collect()
        gc.freeze()
