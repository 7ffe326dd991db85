"""The change feed's reader and its watchers (``berth.serve.watch``):
positions, frames, the ring of recent events, and the fan-out."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import orjson
from sqlalchemy.engine import Connection

from berth.api import routes
from berth.api.schemas import change as schema
from berth.api.views import change as feed_view
from berth.db import events
from berth.db.engine import Database
from berth.domain import change
from berth.metrics import Metrics
from berth.position import Position
from berth.serve.watch.notify import Listener

LOG = logging.getLogger("berth.server")

#: Where the watch is, as the API's routes declare it.
PATH = routes.WATCH
#: Seconds between two looks at the change sequence, with up to
#: ``POLL_WATCHERS`` watchers open; with more, the interval grows with
#: them up to ``MAX_POLL``: fewer, larger batches, so fewer socket writes
#: a second (one per watcher per batch is the feed's main cost).
POLL, POLL_WATCHERS, MAX_POLL = 0.05, 2500, 0.1
#: Seconds between two polls while PostgreSQL's LISTEN wakes the feed at
#: each write (``notify``): a missed or merged notification costs at most
#: this. Woken, it polls at once, unless the last poll is less than
#: ``woken_interval`` ago.
FALLBACK_POLL = 1.0
#: Seconds between two woken polls, at least: each poll is two queries
#: on the database and a thread hop, whatever the watchers.
MIN_WOKEN = 0.02
#: Seconds of silence after which a watcher gets a bookmark.
HEARTBEAT = 5.0
#: The ring of recent events joining watchers replay (whichever is less).
RING_SECONDS, RING_EVENTS = 60.0, 100_000
#: Bytes waiting in a watcher's socket buffer when it does not read;
#: beyond, it gets nothing more and its stream ends once the buffer has
#: gone out (it resumes from its last position, missing nothing).
MAX_BUFFERED = 1 << 20
SSE, JSONL = "text/event-stream", "application/x-ndjson"
#: The event name of a bookmark frame.
BOOKMARK = b"bookmark"


class Entry(NamedTuple):
    """An event in stream order, with the position to resume from when
    it is the last of its write a watcher gets (``after``) and when more
    of its write follow (``before``: the write is not seen whole)."""

    event: events.Stored
    before: str
    after: str


def entries(start: Position, found: Iterable[events.Stored]) -> list[Entry]:
    """``found`` (events in stream order, after ``start``) as entries."""
    at, before, out = start, str(start), []
    for e in found:
        at = at.past(e.slot, e.seq)
        after = str(at)
        out.append(Entry(e, before, after))
        before = after
    return out


def frame(fmt: str, name: bytes, resume: str, data: bytes) -> bytes:
    """One frame: a JSON line, or an SSE event whose id is ``resume``."""
    if fmt == SSE:
        return b"id: %s\nevent: %s\ndata: %s\n\n" % (resume.encode(), name, data)
    return data + b"\n"


def bookmark(fmt: str, position: str) -> bytes:
    """A frame with only the position (``{"after": ...}``)."""
    return frame(fmt, BOOKMARK, position, orjson.dumps({"after": position}))


def poll_interval(watchers: int) -> float:
    """Seconds between two polls with ``watchers`` open."""
    return min(MAX_POLL, POLL * max(1.0, watchers / POLL_WATCHERS))


def woken_interval(watchers: int) -> float:
    """Seconds from a poll to the next a notification asks for, with
    ``watchers`` open: as few as keep the socket writes a second within
    what ``POLL_WATCHERS`` watchers polled every ``POLL`` make (one per
    watcher per batch: the feed's main cost), never more than
    :func:`poll_interval` and never less than ``MIN_WOKEN``. With no
    watcher nobody waits: the plain interval, so that a server's writes
    cost its feed no more polls than without the notifications."""
    if not watchers:
        return poll_interval(0)
    return max(MIN_WOKEN, min(poll_interval(watchers), POLL * watchers / POLL_WATCHERS))


def wire(data: bytes, *, chunked: bool) -> bytes:
    """``data`` as it goes on the connection: one HTTP/1.1 chunk, or as
    it is for HTTP/1.0 (whose stream ends with the connection)."""
    return b"%x\r\n%s\r\n" % (len(data), data) if chunked else data


def frames(fmt: str, got: list[Entry], cache: dict[Any, bytes] | None = None) -> bytes:
    """The frames of ``got`` (what one watcher gets, in order); ``cache``
    shares each encoding between the watchers of one batch."""
    out = []
    for n, entry in enumerate(got):
        e = entry.event
        whole = n + 1 == len(got) or (got[n + 1].event.slot, got[n + 1].event.seq) != (
            e.slot,
            e.seq,
        )
        key = (id(entry), whole, fmt)
        data = None if cache is None else cache.get(key)
        if data is None:
            resume = entry.after if whole else entry.before
            data = frame(
                fmt,
                e.kind.encode(),
                resume,
                orjson.dumps({**feed_view.event_body(e), "after": resume}),
            )
            if cache is not None:
                cache[key] = data
        out.append(data)
    return b"".join(out)


@dataclass(eq=False)
class Watcher:
    """One open stream: its format, filters, and the connection the feed
    writes its frames to once it joined the live stream (without a task
    or a queue of its own: at thousands of watchers those cost as much
    as the writes)."""

    fmt: str
    filters: events.Filters
    tree: tuple[str, ...] | None
    transport: asyncio.WriteTransport
    chunked: bool = True
    #: Done when the feed ended the stream (a slow reader, a reset).
    ended: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    last: float = field(default_factory=time.monotonic)

    @property
    def group(self) -> tuple[events.Filters, tuple[str, ...] | None]:
        return self.filters, self.tree

    @property
    def framing(self) -> tuple[str, bool]:
        """What its bytes depend on beyond the events: shared by many."""
        return self.fmt, self.chunked

    def push(self, data: bytes, now: float) -> bool:
        """Write ``data`` (framed by :func:`wire`) without waiting; False
        when the connection is gone or the watcher reads too slowly, and
        it was ended instead."""
        transport = self.transport
        if transport.is_closing() or (transport.get_write_buffer_size() > MAX_BUFFERED):
            self.end()
            return False
        transport.write(data)
        self.last = now
        return True

    def end(self) -> None:
        """End the stream (its handler returns, closing the response)."""
        if not self.ended.done():
            self.ended.set_result(None)


class Batch(NamedTuple):
    found: list[events.Stored]
    upto: Position
    #: Per tree watched: the (slot, seq, idx) of the events about it.
    trees: dict[tuple[str, ...], frozenset[tuple[int, int, int]]]


def _key(e: events.Stored) -> tuple[int, int, int]:
    return e.slot, e.seq, e.idx


class Feed:
    """The one reader of the change table and its watchers."""

    def __init__(self, db: Database, pool: ThreadPoolExecutor, metrics: Metrics) -> None:
        self.db, self.pool, self.metrics = db, pool, metrics
        self.position = Position()
        self.text = "0"
        self.ring: deque[tuple[float, Entry, Position]] = deque()
        self.ring_start = Position()
        self.groups: dict[tuple[events.Filters, tuple[str, ...] | None], set[Watcher]] = {}
        self.reading = False
        self.watchers = 0
        self._tick = asyncio.Event()
        #: Set by a notification: something was written since the poll.
        self._wake = asyncio.Event()
        #: PostgreSQL's LISTEN, where there is one (else plain polling).
        self.listener = Listener(db.engine, self._wake.set) if db.backend == "postgresql" else None

    async def _db(self, fn: Callable[[Connection], Any]) -> Any:
        return await asyncio.get_running_loop().run_in_executor(self.pool, self.db.read, fn)

    async def start(self) -> None:
        current, _ = await self._db(events.marks)
        self._reset(current)

    def _reset(self, current: Position) -> None:
        self.position, self.text = current, str(current)
        self.ring.clear()
        self.ring_start = current

    async def run(self) -> None:
        """Poll, deliver and send bookmarks until cancelled (with the
        listener that wakes it, on PostgreSQL)."""
        listening = None if self.listener is None else asyncio.create_task(self.listener.run())
        try:
            await self._run()
        finally:
            if listening is not None:
                listening.cancel()
                await asyncio.wait([listening], timeout=5.0)

    async def _run(self) -> None:
        beat = time.monotonic()
        while True:
            self._wake.clear()  # what the poll reads needs no wake-up
            await self._poll()
            now = time.monotonic()
            if now - beat >= 1.0:
                beat = now
                self._heartbeats(now)
            await self._pause(now)

    async def _pause(self, polled: float) -> None:
        """Until the next poll: ``poll_interval`` after the last one
        (ended at ``polled``), or, while LISTEN works, until a
        notification (but not sooner than ``woken_interval``) or
        ``FALLBACK_POLL``."""
        if self.listener is None or not self.listener.listening:
            await asyncio.sleep(poll_interval(self.watchers))
            return
        try:
            await asyncio.wait_for(self._wake.wait(), FALLBACK_POLL)
        except TimeoutError:
            return
        rest = polled + woken_interval(self.watchers) - time.monotonic()
        if rest > 0:
            await asyncio.sleep(rest)

    async def _poll(self) -> None:
        trees = {tree for _, tree in self.groups if tree is not None}
        self.reading = True
        try:
            batch = await self._db(functools.partial(_read_batch, after=self.position, trees=trees))
        except events.Gone as gone:
            LOG.warning(
                "change feed: %s; ending every watch",
                (
                    "the database's change sequence went back (a restored backup?)"
                    if gone.ahead
                    else "the watched history is gone (pruned, or berth db mark-restored)"
                ),
            )
            self.end_all()
            self._reset((await self._db(events.marks))[0])
            batch = None
        except Exception as exc:  # noqa: BLE001 - keep serving; retry
            LOG.warning("change feed: reading the change table failed: %s", exc)
            await asyncio.sleep(1.0)
            batch = None
        finally:
            self.reading = False
        if batch is not None:
            self._deliver(batch)
        self._tick.set()
        self._tick = asyncio.Event()

    def _deliver(self, batch: Batch) -> None:
        start = self.position
        got = entries(start, batch.found)
        cache: dict[Any, bytes] = {}
        for (filters, tree), group in list(self.groups.items()):
            about = None if tree is None else batch.trees.get(tree, frozenset())
            mine = [
                x
                for x in got
                if change.passes(filters, x.event) and (about is None or _key(x.event) in about)
            ]
            if not mine:
                continue
            self.metrics.feed_events.inc(len(mine) * len(group))
            if self._send(group, mine, cache):
                # Once per group, not per watcher (that would cost as much
                # as the writes); wall clock, as the events' stored time.
                self.metrics.feed_delivery.observe(
                    time.time() - min(x.event.created_at for x in mine)
                )
        self.position = self.position.merged(batch.upto)
        self.text = str(self.position)
        now = time.monotonic()
        at = start
        for x in got:
            at = at.past(x.event.slot, x.event.seq)
            self.ring.append((now, x, at))
        while self.ring and (len(self.ring) > RING_EVENTS or now - self.ring[0][0] > RING_SECONDS):
            self.ring_start = self.ring_start.merged(self.ring.popleft()[2])

    def _send(self, group: set[Watcher], mine: list[Entry], cache: dict[Any, bytes]) -> bool:
        """Write ``mine`` to every watcher of ``group``; whether any of
        them took it (the others are ended and leave)."""
        by_framing: dict[tuple[str, bool], bytes] = {}
        now, sent = time.monotonic(), False
        for w in list(group):
            data = by_framing.get(w.framing)
            if data is None:
                data = by_framing[w.framing] = wire(frames(w.fmt, mine, cache), chunked=w.chunked)
            if w.push(data, now):
                sent = True
            else:
                self.leave(w)
        return sent

    def _heartbeats(self, now: float) -> None:
        marks: dict[tuple[str, bool], bytes] = {}
        for group in list(self.groups.values()):
            for w in list(group):
                if now - w.last >= HEARTBEAT:
                    data = marks.get(w.framing)
                    if data is None:
                        data = marks[w.framing] = wire(
                            bookmark(w.fmt, self.text), chunked=w.chunked
                        )
                    if not w.push(data, now):
                        self.leave(w)

    def leave(self, w: Watcher) -> None:
        group = self.groups.get(w.group)
        if group is not None and w in group:
            group.discard(w)
            self.watchers -= 1
            self.metrics.feed_watchers.dec()
            if not group:
                del self.groups[w.group]

    def end_all(self) -> None:
        for group in list(self.groups.values()):
            for w in group:
                w.end()
        self.groups.clear()
        self.watchers = 0
        self.metrics.feed_watchers.set(0)

    async def follow(self, w: Watcher, at: Position, write: Callable[[bytes], Any]) -> None:
        """Bring ``w`` from position ``at`` up to the live stream (the
        database, then the ring), writing what it gets with ``write``
        (which frames it and waits for the connection), and join it: from
        then on the feed writes to ``w.transport``, until ``w.ended``.
        Raises ``events.Gone`` when the history after ``at`` is pruned."""
        while True:
            if not at >= self.ring_start:  # older than the ring
                page = await self._db(
                    functools.partial(
                        change.read,
                        after=at,
                        filters=w.filters,
                        trees=w.tree,
                        limit=schema.DEFAULT_LIMIT,
                    )
                )
                await write(frames(w.fmt, entries(at, page.events)))
                at = at.merged(page.upto)
                continue
            if self.reading or not self.position >= at:
                await self._tick.wait()  # the reader is not there yet
                continue
            fresh = [x.event for _, x, _ in self.ring if x.event.seq > at.get(x.event.slot)]
            if not fresh:  # nothing between: join (one step of the loop)
                self.groups.setdefault(w.group, set()).add(w)
                self.watchers += 1
                self.metrics.feed_watchers.inc()
                if not w.push(
                    wire(bookmark(w.fmt, self.text), chunked=w.chunked), time.monotonic()
                ):
                    self.leave(w)
                return
            reached = self.position
            mine = [e for e in fresh if change.passes(w.filters, e)]
            if w.tree is not None and mine:
                mine = await self._db(functools.partial(change.of_tree, found=mine, trees=w.tree))
            await write(frames(w.fmt, entries(at, mine)))
            at = at.merged(reached)


def _read_batch(conn: Connection, after: Position, trees: set[tuple[str, ...]]) -> Batch | None:
    """Every event after ``after`` (None when the sequence has not
    moved), and which are about each of ``trees``."""
    current, _ = events.marks(conn)
    if after >= current:
        return None
    found: list[events.Stored] = []
    pos = after
    while True:
        page = events.read(conn, pos, events.Filters(), schema.MAX_LIMIT)
        found += page.events
        pos = pos.merged(page.upto)
        if not page.more:
            break
    about = {tree: frozenset(_key(e) for e in change.of_tree(conn, found, tree)) for tree in trees}
    return Batch(found, pos, about)
