"""The world loaded once, before the server forks its workers.

A server that builds the application in its master process (``berth
serve``: gunicorn's ``preload_app``; uwsgi without ``--lazy-apps``) calls
``warm`` there: the request schemas' fast checks are compiled
(``berth.api.schemas.compile_all``), the candidate cache loads the world whole, the garbage
collector freezes it (``gc.freeze``: collections in the workers never
walk, and so never write to, the inherited pages) and the master closes
its database connections. Every worker forked afterwards shares the
world's pages copy-on-write with the master and the other workers, and
calls ``after_fork`` first thing: it forgets (never closes) any
connection it inherited, so no connection is ever used by two
processes. Its first request then catches up by the change sequence
(a partial refresh of what changed since the master's load), not by a
whole load; only a gap in the change rows (the master's world older
than the rows kept, ``changes.KEEP``) makes that worker load whole.

Before forking each worker (gunicorn's ``pre_fork``), the master calls
``refresh``: its world catches up by the change sequence, as a worker's
would, so that a worker started late (one replaced for its memory,
``berth.serve.edge.Recycler``, or after a crash) shares a world that is up
to date, rebuilt indexes included, instead of rebuilding its own copy.

With ``[berth] candidate_cache = false`` there is nothing to share:
``warm`` does nothing and each request builds its own world.
"""

from __future__ import annotations

import gc
import logging
import time
from typing import Any

from berth.api import schemas

LOG = logging.getLogger("berth.server")


def _state(app: Any) -> Any:
    """The application state of an app made by ``create_app``, or None."""
    return getattr(app, "state", None)


def warm(app: Any) -> bool:
    """Load ``app``'s candidate cache whole and freeze it for sharing
    with processes forked later; False when the cache is off."""
    state = _state(app)
    if state is None or not state.candidate_cache.keep:
        return False
    start = time.perf_counter()
    schemas.compile_all()
    cached = state.db.read(state.candidate_cache.current)
    # What is alive now (the world, the modules) is what the workers
    # share: out of the collector's view, so that no collection in a
    # worker touches (and copies) those pages.
    gc.collect()
    gc.freeze()
    # The master serves no request: no connection of its own to leak
    # into a worker.
    state.db.engine.dispose()
    LOG.info(
        "candidate cache: %d providers loaded before forking workers in %.2f s",
        len(cached.world.providers),
        time.perf_counter() - start,
    )
    return True


def refresh(app: Any) -> None:
    """In the master, before forking a worker: bring ``app``'s world up
    to the change sequence and freeze what that made, for the new worker
    to share. Any failure is logged, and the worker catches up itself."""
    state = _state(app)
    if state is None or not state.candidate_cache.keep:
        return
    before = state.candidate_cache.latest
    start = time.perf_counter()
    try:
        cached = state.db.read(state.candidate_cache.current)
    except Exception as exc:  # the master must go on forking
        LOG.warning(
            "candidate cache: the master could not bring its "
            "world up to date before forking a worker (%s); the "
            "worker catches up itself",
            exc,
        )
        return
    finally:
        state.db.engine.dispose()
    if cached is not before:
        gc.freeze()
        LOG.info(
            "candidate cache: the master's world caught up before forking a worker in %.2f s",
            time.perf_counter() - start,
        )


def after_fork(app: Any, *, one_at_a_time: bool = False) -> None:
    """In a new worker: drop the inherited connection pool without
    closing its connections (they belong to the parent), so this worker
    opens its own. ``one_at_a_time``: the worker answers one request at a
    time (gunicorn's sync workers), so its candidate cache may update its
    world in place (``CandidateCache.exclusive``) rather than copy what it
    shares with the master."""
    state = _state(app)
    if state is not None:
        state.db.engine.dispose(close=False)
        state.candidate_cache.exclusive = one_at_a_time


#: uwsgi options under which a worker answers more than one request at a
#: time (a value other than 1 for the first two).
_CONCURRENT = ("threads", "async", "gevent", "greenlet", "ugreen")


def uwsgi_one_at_a_time(opt: dict[str, Any]) -> bool:
    """Whether a uwsgi worker started with options ``opt`` (``uwsgi.opt``:
    names to bytes, or lists of them when given twice) answers one
    request at a time, so that its candidate cache may update its world
    in place instead of copying it (``CandidateCache.exclusive``)."""
    for name in _CONCURRENT:
        value = opt.get(name)
        if isinstance(value, list):
            value = value[-1]
        if value is None:
            continue
        text = value.decode() if isinstance(value, bytes) else str(value)
        if name in ("threads", "async") and text.strip() in ("", "0", "1"):
            continue
        return False
    return True
