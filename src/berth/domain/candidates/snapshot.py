"""Each worker's copy of the world, kept fresh by the change sequence.

``WorldCache.current(conn)`` costs one small query when nothing changed
since the last request: it compares the database's change-sequence
position (one counter per slot) with the one the cached world was built
at. When only usage changed (the common case: claims and deletes), it
re-reads the usage of just the
providers that changed. When providers themselves changed (created,
deleted, moved, or their inventory, traits or aggregates written), it
re-reads those providers and rebuilds the indexes in memory (or keeps
them, when only inventory amounts changed). A class or
trait deleted, a gap in the change rows, or changes to a quarter of the
providers or more reload the world whole. A snapshot is never modified
once published, so requests in other threads keep using the one they
started with.

The cache is only as fresh as the change sequence: a process that writes
the database without going through Berth's domain code (a hand-written
SQL fix, an older Berth without migration 0002) does not bump it. ``[berth]
candidate_cache = false`` makes every request build its own world for such
deployments.
"""

from __future__ import annotations

import gc
import logging
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import changes
from berth.db import tables as t
from berth.domain import common
from berth.domain.candidates import load
from berth.domain.candidates.model import World

LOG = logging.getLogger(__name__)

#: Set by server processes (``tune_for_serving``): after a whole load,
#: collect once and move every live object out of the garbage collector's
#: view (``gc.freeze``), so that requests that build thousands of objects
#: do not make the collector walk the world again and again. (Freezing
#: never stops reference counting from freeing an old world.)
FREEZE_AFTER_LOAD = False


def tune_for_serving() -> None:
    """Garbage-collector settings for a process that serves requests:
    rarer young collections, and a frozen world after each whole load.
    Halves the CPU of large candidate answers at 1,000 hosts."""
    global FREEZE_AFTER_LOAD
    gc.set_threshold(5000, 20, 20)
    FREEZE_AFTER_LOAD = True


@dataclass(frozen=True)
class Snapshot:
    """The world as of change-sequence position ``seq`` (or later)."""

    seq: changes.Position
    world: World
    #: resource class and trait name -> id, as of ``seq``
    classes: dict[str, int]
    traits: dict[str, int]

    def class_ids(self, conn: Connection, names: Iterable[str]
                  ) -> dict[str, int]:
        """The ids of the named classes that exist (one created since
        ``seq`` is looked up)."""
        return self._ids(conn, t.resource_classes, self.classes, names)

    def trait_ids(self, conn: Connection, names: Iterable[str]
                  ) -> dict[str, int]:
        """The ids of the named traits that exist (one created since
        ``seq`` is looked up)."""
        return self._ids(conn, t.traits, self.traits, names)

    @staticmethod
    def _ids(conn: Connection, table: sa.Table, known: dict[str, int],
             names: Iterable[str]) -> dict[str, int]:
        wanted = set(names)
        found = {n: known[n] for n in wanted if n in known}
        if len(found) < len(wanted):
            # Creating a class or trait does not bump the sequence: no
            # provider has it yet, so only its name is new.
            found.update(common.ids_by_name(conn, table,
                                            wanted - set(found)))
        return found


class WorldCache:
    """The newest snapshot this process has seen of one database."""

    def __init__(self, keep: bool = True) -> None:
        #: False: build a fresh world for every request
        self.keep = keep
        self._snapshot: Snapshot | None = None
        self._lock = threading.Lock()

    def current(self, conn: Connection) -> Snapshot:
        """A snapshot at least as new as what ``conn``'s transaction can
        see of the change sequence."""
        seq = changes.current(conn)
        snap = self._snapshot
        if snap is not None and snap.seq >= seq:
            return snap
        with self._lock:
            snap = self._snapshot
            if snap is not None and snap.seq >= seq:
                return snap
            fresh, whole = self._refresh(conn, snap, seq)
            if self.keep:
                self._publish(fresh, whole)
            return fresh

    @staticmethod
    def _refresh(conn: Connection, snap: Snapshot | None,
                 seq: changes.Position) -> tuple[Snapshot, bool]:
        """The snapshot at ``seq``, and whether it was loaded whole."""
        if snap is not None:
            found = changes.since(conn, snap.seq, seq)
            if not (found.everything or found.structure):
                world = load.refresh_usage(conn, snap.world, found.usage)
                return Snapshot(seq, world, snap.classes, snap.traits), False
            touched = found.structure | found.usage
            if (not found.everything
                    and len(touched) * 4 < len(snap.world.providers)):
                world, classes, traits = load.refresh_providers(
                    conn, snap.world, touched)
                return Snapshot(seq, world, classes, traits), False
        start = time.perf_counter()
        world, classes, traits = load.load_world(conn)
        LOG.debug("loaded %d providers for the candidate cache in %.1f ms",
                  len(world.providers), (time.perf_counter() - start) * 1000)
        return Snapshot(seq, world, classes, traits), True

    def _publish(self, fresh: Snapshot, whole: bool) -> None:
        self._snapshot = fresh
        if whole and FREEZE_AFTER_LOAD:
            # Unfreeze first: whatever was frozen last time and has since
            # become cyclic garbage is collected now, not kept for ever.
            gc.unfreeze()
            gc.collect()
            gc.freeze()


_CACHES: weakref.WeakKeyDictionary[object, WorldCache] = \
    weakref.WeakKeyDictionary()
_CACHES_LOCK = threading.Lock()


def cache_for(owner: object, keep: bool = True) -> WorldCache:
    """The cache of ``owner`` (a ``Database``: one cache per database
    object, living as long as it does); with ``keep`` False, a throw-away
    cache that builds a fresh world each time."""
    if not keep:
        return WorldCache(keep=False)
    with _CACHES_LOCK:
        cache = _CACHES.get(owner)
        if cache is None:
            cache = _CACHES[owner] = WorldCache()
        return cache
