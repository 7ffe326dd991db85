"""The candidate cache: each application's copy of the world, kept fresh
by the change sequence.

The words, used alike in code, configuration and docs: the *candidate
cache* (:class:`CandidateCache`, one per application:
``State.candidate_cache``, ``[berth] candidate_cache``) keeps a *cached
world* (:class:`CachedWorld`): the *world* (``world.World``: providers
and their indexes) as of one change-sequence position, with the class
and trait ids it was read with. A *refresh* (:class:`Refresh`) makes the
next cached world from the last.

``CandidateCache.current(conn)`` costs one small query when nothing changed
since the last request: it compares the database's change-sequence
position (one counter per slot) with the one the cached world was built
at. A caller that read the position during its request already (the
API's middleware, for the ``Berth-Position`` header) passes it, and the
cache takes it instead of reading the same row again. When only usage
changed (the common case: claims and deletes), it re-reads the usage of
just the providers that changed. When providers themselves changed (created,
deleted, moved, or their inventory, traits or aggregates written), it
re-reads those providers and patches the indexes in memory where they
sit (or keeps them, when only inventory amounts changed; or rebuilds
them, when more than ``world_patch.PATCH_MOST`` providers changed). A class or
trait deleted, a gap in the change rows, or changes to a quarter of the
providers or more reload the world whole. A cached world is never
modified once published, so requests in other threads keep using the one they
started with; except where the cache is ``exclusive`` (a process that
serves one request at a time: ``berth serve``'s workers), where a refresh
edits the provider map and the patched indexes in place, since nobody
else reads the old cached world (copying them would copy, in a forked
worker, every page of their entries that it shares with the master).

The cache is only as fresh as the change sequence: a process that writes
the database without going through Berth's domain code (a hand-written
SQL fix, an older Berth without migration 0002) does not bump it. ``[berth]
candidate_cache = false`` makes every request build its own world for such
deployments.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import changes
from berth.db import tables as t
from berth.domain import common
from berth.domain.allocation_candidate import load
from berth.domain.allocation_candidate.world import World

LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class CachedWorld:
    """The world as of change-sequence position ``seq`` (or later)."""

    seq: changes.Position
    world: World
    #: resource class and trait name -> id, as of ``seq``
    classes: dict[str, int]
    traits: dict[str, int]

    def class_ids(self, conn: Connection, names: Iterable[str]) -> dict[str, int]:
        """The ids of the named classes that exist (one created since
        ``seq`` is looked up)."""
        return self._ids(conn, t.resource_classes, self.classes, names)

    def trait_ids(self, conn: Connection, names: Iterable[str]) -> dict[str, int]:
        """The ids of the named traits that exist (one created since
        ``seq`` is looked up)."""
        return self._ids(conn, t.traits, self.traits, names)

    @staticmethod
    def _ids(
        conn: Connection, table: sa.Table, known: dict[str, int], names: Iterable[str]
    ) -> dict[str, int]:
        wanted = set(names)
        found = {n: known[n] for n in wanted if n in known}
        if len(found) < len(wanted):
            # Creating a class or trait does not bump the sequence: no
            # provider has it yet, so only its name is new.
            found.update(common.ids_by_name(conn, table, wanted - set(found)))
        return found


@dataclass(frozen=True)
class Refresh:
    """What one refresh of the cache did, for its observers."""

    #: "whole" (loaded from scratch), "providers" (some providers re-read)
    #: or "usage" (only usage re-read)
    kind: str
    seconds: float
    cached: CachedWorld
    #: False when the cache is off and the cached world serves one request
    kept: bool
    #: changes in the sequence since the cached world refreshed (0 when
    #: there was none): how far behind the cache was
    behind: int = 0


#: Called after every refresh, in the thread that made it.
RefreshObserver = Callable[[Refresh], None]


class CandidateCache:
    """The newest cached world this application has seen of its database.

    One lives in each application's state (``State.candidate_cache``).
    With ``keep`` False (``[berth] candidate_cache = false``) nothing is
    kept: every ``current`` builds a fresh world for its caller.
    ``observers`` hear of every refresh (metrics, and the serving layer's
    garbage-collector tuning).
    """

    def __init__(self, *, keep: bool = True, observers: Sequence[RefreshObserver] = ()) -> None:
        self.keep = keep
        #: True where one request at a time reads the cache (set by the
        #: server after it forks a single-threaded worker): a cached world
        #: is then replaced by one whose provider map and indexes are the
        #: old one's, edited in place
        self.exclusive = False
        self.observers = list(observers)
        self._latest: CachedWorld | None = None
        self._lock = threading.Lock()

    def current(self, conn: Connection, known: changes.Position | None = None) -> CachedWorld:
        """A cached world at least as new as what ``conn``'s transaction
        can see of the change sequence, or, given ``known``, as new as
        that position: one the caller read during its request, after the
        request began (so it holds every write the caller could have
        seen committed), which spares reading it again."""
        seq = changes.current(conn) if known is None else known
        if not self.keep:
            # Nothing is shared, so nothing to lock.
            return self._refresh(conn, None, seq)
        last = self._latest
        if last is not None and last.seq >= seq:
            return last
        with self._lock:
            last = self._latest
            if last is not None and last.seq >= seq:
                return last
            fresh = self._refresh(conn, last, seq)
            self._latest = fresh
            return fresh

    @property
    def latest(self) -> CachedWorld | None:
        """The cached world kept now (None before the first load, or when
        the cache is off)."""
        return self._latest

    def _refresh(
        self, conn: Connection, last: CachedWorld | None, seq: changes.Position
    ) -> CachedWorld:
        start = time.perf_counter()
        kind, fresh = self._build(conn, last, seq)
        seconds = time.perf_counter() - start
        # One line per refresh: tests and operators count whole loads.
        LOG.debug(
            "candidate cache: %s refresh, %d providers, %.1f ms",
            kind,
            len(fresh.world.providers),
            seconds * 1000,
        )
        if self.observers:
            done = Refresh(
                kind, seconds, fresh, self.keep, 0 if last is None else seq.total - last.seq.total
            )
            for observer in self.observers:
                observer(done)
        return fresh

    def _build(
        self, conn: Connection, last: CachedWorld | None, seq: changes.Position
    ) -> tuple[str, CachedWorld]:
        """How the cached world at ``seq`` was made, and that world."""
        if last is not None:
            found = changes.since(conn, last.seq, seq)
            # Only where no other request can be reading the old cached
            # world may it be edited in place (a cache that keeps nothing
            # has no old one: ``last`` is None).
            in_place = self.exclusive
            if not (found.everything or found.structure):
                world = load.refresh_usage(conn, last.world, found.usage, in_place=in_place)
                return "usage", CachedWorld(seq, world, last.classes, last.traits)
            touched = found.structure | found.usage
            if not found.everything and len(touched) * 4 < len(last.world.providers):
                world, classes, traits = load.refresh_providers(
                    conn, last.world, touched, in_place=in_place
                )
                return "providers", CachedWorld(seq, world, classes, traits)
        world, classes, traits = load.load_world(conn)
        return "whole", CachedWorld(seq, world, classes, traits)
