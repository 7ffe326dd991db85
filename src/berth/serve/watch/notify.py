"""PostgreSQL's LISTEN for the change feed (``berth.serve.watch``): a
wake-up, never a source of events.

Migration 0007 makes every numbered write's insert into ``berth_changes``
notify :data:`CHANNEL` at its commit (a statement trigger: the writers
send nothing more). :class:`Listener` holds one connection of its own,
in autocommit, LISTENing there, read by the feed's event loop (psycopg's
asynchronous connection waits on its socket), and calls ``wake`` for each
notification. The feed then polls the change table at once rather than
at its next tick; the table stays the only source of what changed and of
the position, so a notification that is lost, late or merged with others
only makes the feed wait for its fallback poll.

When the connection fails (the database restarts, the network drops it)
the feed polls at its plain interval (:attr:`Listener.listening` is
False) while the listener connects again, LISTENs again and wakes the
feed once, for what was written in between.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

import psycopg
from sqlalchemy.engine import Engine

LOG = logging.getLogger("berth.server")

#: The channel migration 0007's trigger notifies.
CHANNEL = "berth_changes"
#: Its connection's ``application_name`` (unless the URL names one).
APPLICATION = "berth-feed-listen"
#: Seconds of silence after which the connection is checked (a query),
#: so that one a dead peer left open is found and replaced.
CHECK = 30.0
#: Seconds between two attempts to connect, doubling up to the second.
RETRY, MAX_RETRY = 1.0, 30.0


def connect_args(engine: Engine) -> dict[str, Any]:
    """psycopg's connection arguments for ``engine``'s database, as the
    engine itself connects (the URL's host, user, database and query
    options), with a connect timeout and TCP keepalives."""
    _, params = engine.dialect.create_connect_args(engine.url)
    params = {k: v for k, v in params.items() if k != "context"}
    params.setdefault("connect_timeout", 10)
    # What pg_stat_activity shows for it.
    params.setdefault("application_name", APPLICATION)
    params.setdefault("keepalives", 1)
    params.setdefault("keepalives_idle", 30)
    params.setdefault("keepalives_interval", 10)
    params.setdefault("keepalives_count", 3)
    return params


class Listener:
    """LISTEN on :data:`CHANNEL`, calling ``wake`` for each notification
    (and once on each (re)connection), until cancelled."""

    def __init__(self, engine: Engine, wake: Callable[[], None]) -> None:
        self.params, self.wake = connect_args(engine), wake
        #: Whether notifications arrive now (else the feed polls as
        #: without them).
        self.listening = False

    async def run(self) -> None:
        delay = RETRY
        while True:
            try:
                await self._listen()
            except Exception as exc:  # noqa: BLE001 - poll on; try again
                if self.listening:  # it worked until now: soon again
                    delay = RETRY
                if delay == RETRY:  # once per outage, not per attempt
                    LOG.warning(
                        "change feed: no LISTEN %s (%s); polling until it is back",
                        CHANNEL,
                        _first_line(exc),
                    )
            finally:
                if self.listening:  # the feed waits for it: poll again
                    self.listening = False
                    self.wake()
            await asyncio.sleep(delay)
            delay = min(delay * 2, MAX_RETRY)

    async def _listen(self) -> None:
        conn = await psycopg.AsyncConnection.connect(autocommit=True, **self.params)
        try:
            await conn.execute("LISTEN " + CHANNEL)
            self.listening = True
            LOG.info("change feed: LISTEN %s (woken at each write's commit)", CHANNEL)
            self.wake()  # what was written while not listening
            while True:
                async for _ in conn.notifies(timeout=CHECK):
                    self.wake()
                await conn.execute("SELECT 1")  # still there?
                self.wake()  # any notification the query took
        finally:
            await conn.close()  # the socket only: nothing sent


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
