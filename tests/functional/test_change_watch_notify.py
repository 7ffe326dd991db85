"""PostgreSQL's LISTEN wakes the change feed: migration 0007's trigger
notifies once per numbered write (a no-op migration elsewhere); the feed
polls at once when notified, falls back to polling when the listening
connection is lost or a notification never comes, and LISTENs again."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
import sqlalchemy as sa

from berth.api.app import create_app
from berth.db import migrate, setup
from berth.db.engine import Database, create_engine
from berth.serve.watch import feed as feed_mod
from berth.serve.watch import notify
from support.change_feed import position
from support.change_watch import FeedServer, Stream, new_provider, wait_for
from support.databases import downgrade
from tests.conftest import BACKENDS, Client, _server_db, make_conf

_TRIGGER = "SELECT count(*) FROM pg_trigger WHERE tgname = 'berth_changes_notify'"


@pytest.mark.parametrize("kind", BACKENDS)
def test_0007_notifies_once_per_write_on_postgresql_only(kind: str, tmp_path: Any) -> None:
    if kind == "sqlite":
        url, drop = "sqlite:///%s" % (tmp_path / "n.sqlite"), None
    else:
        url, drop = _server_db(kind, str(tmp_path))
    engine = create_engine(url)
    try:
        setup.prepare(engine)
        downgrade(engine, "0006")  # and back: both ways on every backend
        migrate.upgrade(engine)
        assert migrate.current_revision(engine) == "0007"
        if kind != "postgresql":
            return
        with engine.connect() as conn:
            assert conn.scalar(sa.text(_TRIGGER)) == 1
        args = notify.connect_args(engine)
        with (
            psycopg.connect(autocommit=True, **args) as listener,
            Client(create_app(make_conf(), Database(engine))) as client,
        ):
            listener.execute("LISTEN " + notify.CHANNEL)
            # One write of many rows (a change row per provider and per
            # usage, an event per consumer): one notification, at commit.
            rp = new_provider(client, "host")
            assert (
                client.put(
                    "/resource_providers/%s/inventories" % rp,
                    json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}},
                ).status_code
                == 200
            )
            got = list(listener.notifies(timeout=2.0))
            assert [n.channel for n in got] == [notify.CHANNEL] * 2
            client.get("/resource_providers")  # a read notifies nothing
            assert list(listener.notifies(timeout=0.5)) == []
        downgrade(engine, "0006")
        with engine.connect() as conn:
            assert conn.scalar(sa.text(_TRIGGER)) == 0
            assert (
                conn.scalar(
                    sa.text("SELECT count(*) FROM pg_proc WHERE proname = 'berth_changes_notify'")
                )
                == 0
            )
    finally:
        engine.dispose()
        if drop is not None:
            drop()


def test_woken_polls_keep_the_socket_writes_of_the_plain_poll() -> None:
    # At most POLL_WATCHERS writes every POLL seconds, never more polls
    # than the plain interval's, never more often than MIN_WOKEN; with no
    # watcher, no more polls than the plain interval's.
    assert feed_mod.woken_interval(0) == feed_mod.POLL
    assert feed_mod.woken_interval(1) == feed_mod.MIN_WOKEN
    assert feed_mod.woken_interval(1000) == pytest.approx(
        feed_mod.POLL * 1000 / feed_mod.POLL_WATCHERS
    )
    assert feed_mod.woken_interval(feed_mod.POLL_WATCHERS) == feed_mod.POLL
    assert feed_mod.woken_interval(10**6) == feed_mod.MAX_POLL


def listener(server: FeedServer) -> notify.Listener:
    found = server.running.feed.listener
    assert found is not None
    return found


def kill_listener(db: Database) -> None:
    """End the feed's listening connection, as a database restart would."""
    with db.engine.connect() as conn:
        killed = conn.scalar(
            sa.text(
                "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                "WHERE datname = current_database() AND application_name = "
                ":name"
            ),
            {"name": notify.APPLICATION},
        )
    assert killed == 1


def test_a_notification_wakes_the_feed(client: Client, pg_feed: FeedServer) -> None:
    stream = Stream(pg_feed.port, "after=" + position(client))
    for n in range(3):
        made = new_provider(client, "woken%d" % n)
        assert [e["subject"] for e in stream.events(1)] == [made]


def test_without_listen_the_feed_polls_then_listens_again(
    client: Client, db: Database, pg_feed: FeedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(notify, "RETRY", 3.0)
    stream = Stream(pg_feed.port, "after=" + position(client))
    kill_listener(db)
    wait_for(lambda: not listener(pg_feed).listening, "LISTEN is lost")
    made = new_provider(client, "polled")  # found by the plain poll
    assert [e["subject"] for e in stream.events(1)] == [made]
    wait_for(lambda: listener(pg_feed).listening, "it LISTENs again")
    made = new_provider(client, "woken")
    assert [e["subject"] for e in stream.events(1)] == [made]


def test_a_notification_that_never_comes_costs_a_fallback_poll(
    client: Client, conf: Any, db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    if db.backend != "postgresql":
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's")
    monkeypatch.setattr(notify, "CHANNEL", "berth_nobody_notifies")
    monkeypatch.setattr(feed_mod, "FALLBACK_POLL", 0.2)
    server = FeedServer(conf, db)
    try:
        wait_for(lambda: listener(server).listening, "the feed LISTENs")
        stream = Stream(server.port, "after=" + position(client))
        made = [new_provider(client, "missed%d" % n) for n in range(3)]
        assert [e["subject"] for e in stream.events(3)] == made
    finally:
        server.close()
