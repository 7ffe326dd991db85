"""The change feed's watch form (``GET /berth/changes/watch``,
``berth.serve.watch``), served in-process on a free port over the test's
database, written to through the API: events stream in order with their
positions; filters and policy as ``GET /berth/changes``; JSON lines and
SSE framing; bookmarks; 410; resumption without a gap or a duplicate.
"""

from __future__ import annotations

import http.client
import json
import socket
import time
import uuid as uuidlib
from typing import Any

import pytest

from berth.db import events
from berth.db.engine import Database
from berth.serve import watch
from berth.serve.watch import feed as feed_mod
from support.change_feed import position
from support.change_watch import (
    FeedServer,
    Stream,
    allocate,
    big_provider,
    many_claims,
    new_provider,
    set_traits,
    wait_for,
)
from tests.conftest import Client, make_conf


def listed(client: Client, after: str, **filters: str) -> list[dict[str, Any]]:
    resp = client.get("/berth/changes", params={"after": after, **filters})
    assert resp.status_code == 200
    return resp.json()["events"]  # type: ignore[no-any-return]


def test_streams_the_writes_in_order_as_the_list_gives_them(
    client: Client, watch_feed: FeedServer
) -> None:
    start = position(client)
    stream = Stream(watch_feed.port, "after=" + start)
    assert stream.resp.status == 200
    assert stream.resp.getheader("content-type") == feed_mod.JSONL
    assert stream.frame() == {"after": start}  # joined: a bookmark
    root = new_provider(client, "root")
    child = new_provider(client, "child", parent=root)
    set_traits(client, child, ["HW_CPU_X86_AVX"])
    got = stream.events(3)
    assert [(e["kind"], e["subject"]) for e in got] == [
        ("provider.created", root),
        ("provider.created", child),
        ("traits.set", child),
    ]
    # The same events as the list, each with the position after it.
    assert [{k: v for k, v in e.items() if k != "after"} for e in got] == listed(client, start)
    assert [e["after"] for e in got] == [e["position"] for e in got]
    registry = watch_feed.running.feed.metrics.registry
    assert registry.get_sample_value("berth_feed_watchers") == 1
    assert registry.get_sample_value("berth_feed_events_sent_total") == 3
    stream.close()


def test_resumes_after_a_dropped_connection_without_gap_or_duplicate(
    client: Client, watch_feed: FeedServer
) -> None:
    stream = Stream(watch_feed.port, "after=" + position(client))
    first = [new_provider(client, "a%d" % i) for i in range(3)]
    got = stream.events(3)
    assert [e["subject"] for e in got] == first
    stream.close()
    # Written while nobody watches; then more while it catches up.
    missed = [new_provider(client, "b%d" % i) for i in range(4)]
    again = Stream(watch_feed.port, "after=" + got[-1]["after"])
    later = [new_provider(client, "c%d" % i) for i in range(2)]
    subjects = [e["subject"] for e in again.events(6)]
    assert subjects == missed + later
    # Nothing more: the next frame is a bookmark at the last write.
    feed_mod.HEARTBEAT, saved = 0.1, feed_mod.HEARTBEAT
    try:
        assert again.frame() == {"after": position(client)}
    finally:
        feed_mod.HEARTBEAT = saved
    again.close()


def test_server_sent_events_resume_from_last_event_id(
    client: Client, watch_feed: FeedServer
) -> None:
    start = position(client)
    stream = Stream(watch_feed.port, "after=" + start, headers={"accept": "text/event-stream"})
    assert stream.resp.getheader("content-type") == feed_mod.SSE
    assert stream.frame() == {"id": start, "event": "bookmark", "data": {"after": start}}
    made = [new_provider(client, "s%d" % i) for i in range(3)]
    got = stream.events(3)
    assert [f["event"] for f in got] == ["provider.created"] * 3
    assert [f["data"]["subject"] for f in got] == made
    assert all(f["id"] == f["data"]["after"] for f in got)
    stream.close()
    # EventSource reconnects to the same URL with the last id it saw.
    again = Stream(
        watch_feed.port, "after=%s&format=sse" % start, headers={"last-event-id": got[0]["id"]}
    )
    assert [f["data"]["subject"] for f in again.events(2)] == made[1:]
    again.close()


def test_filters_as_the_list(client: Client, watch_feed: FeedServer) -> None:
    start = position(client)
    root = new_provider(client, "tree-root")
    other = new_provider(client, "other")
    traits = Stream(watch_feed.port, "after=%s&kind=traits.set" % start)
    tree = Stream(watch_feed.port, "after=%s&tree=%s" % (start, root))
    consumer = str(uuidlib.uuid4())
    mine = Stream(watch_feed.port, "after=%s&consumer=%s" % (start, consumer))
    set_traits(client, other, ["HW_CPU_X86_SSE"])
    child = new_provider(client, "leaf", parent=root)
    set_traits(client, child, ["HW_CPU_X86_AVX2"])
    allocate(client, other, consumer, "p1")
    allocate(client, child, str(uuidlib.uuid4()), "p2")
    assert [(e["kind"], e["subject"]) for e in traits.events(2)] == [
        ("traits.set", other),
        ("traits.set", child),
    ]
    tree_events = tree.events(5)
    assert [e["kind"] for e in tree_events] == [
        "provider.created",
        "provider.created",
        "traits.set",
        "inventories.set",
        "allocations.replaced",
    ]
    assert tree_events[0]["subject"] == root
    assert [e["subject"] for e in mine.events(1)] == [consumer]
    for name, stream in (("kind", traits), ("tree", tree)):
        filtered = listed(client, start, **{name: "traits.set" if name == "kind" else root})
        assert len(filtered) == {"kind": 2, "tree": 5}[name]
        stream.close()
    mine.close()


def test_bookmarks_carry_the_position_past_filtered_writes(
    client: Client, watch_feed: FeedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(feed_mod, "HEARTBEAT", 0.2)
    start = position(client)
    stream = Stream(watch_feed.port, "after=%s&kind=trait.created" % start)
    assert stream.frame() == {"after": start}
    new_provider(client, "not-watched")
    now = position(client)
    assert now != start
    # Only bookmarks: the first may still say the old position.
    deadline = time.monotonic() + 10
    while (got := stream.frame()) != {"after": now}:
        assert set(got) == {"after"} and time.monotonic() < deadline
    stream.close()


def test_pruned_position_is_410_in_placement_format(
    client: Client, db: Database, watch_feed: FeedServer
) -> None:
    old = position(client)
    new_provider(client, "gone")
    slot = int(position(client).split(":")[0])
    db.run(lambda conn: events.prune(conn, slot, time.time() + 1))
    stream = Stream(watch_feed.port, "after=" + old)
    assert stream.resp.status == 410
    error = json.loads(stream.resp.read())["errors"][0]
    assert error["code"] == "berth.changes.gone"
    assert error["oldest_position"] == position(client)
    assert error["request_id"] == stream.resp.getheader("x-openstack-request-id")
    # The very body the API gives (the one error mapping), but its id.
    listed = client.get("/berth/changes", params={"after": old})
    assert listed.status_code == 410
    assert {**listed.json()["errors"][0], "request_id": None} == {**error, "request_id": None}


def test_bad_queries_are_400(client: Client, watch_feed: FeedServer) -> None:
    for query in (
        "after=x:1",
        "after=0&kind=nope",
        "after=0&format=xml",
        "kind=traits.set",
        "after=0&colour=red",
    ):
        stream = Stream(watch_feed.port, query)
        assert stream.resp.status == 400, query
        assert json.loads(stream.resp.read())["errors"][0]["status"] == 400


def test_policy_as_the_list(client: Client, watch_feed: FeedServer) -> None:
    start = position(client)
    no_token = Stream(watch_feed.port, "after=" + start, token=None)
    assert no_token.resp.status == 401
    assert json.loads(no_token.resp.read())["errors"][0]["status"] == 401
    stranger = Stream(watch_feed.port, "after=" + start, token="bob:p1")
    assert stranger.resp.status == 403
    # A project reader reads its own project's allocation events only.
    reader = {"x-roles": "reader"}
    assert (
        Stream(watch_feed.port, "after=" + start, token="bob:p1", headers=reader).resp.status == 403
    )
    assert (
        Stream(
            watch_feed.port, "after=%s&project=p2" % start, token="bob:p1", headers=reader
        ).resp.status
        == 403
    )
    own = Stream(watch_feed.port, "after=%s&project=p1" % start, token="bob:p1", headers=reader)
    assert own.resp.status == 200
    rp = new_provider(client, "shared")
    consumer = str(uuidlib.uuid4())
    allocate(client, rp, str(uuidlib.uuid4()), "p2")
    allocate(client, rp, consumer, "p1")
    got = own.events(1)
    assert (got[0]["kind"], got[0]["subject"]) == ("allocations.replaced", consumer)
    own.close()


def test_keystone_without_a_token_is_401(db: Database) -> None:
    conf = make_conf(
        api__auth_strategy="keystone",
        keystone_authtoken__www_authenticate_uri="http://keystone.test:5000",
    )
    server = FeedServer(conf, db)
    try:
        stream = Stream(server.port, "after=0", token=None)
        assert stream.resp.status == 401
        assert "keystone.test" in stream.resp.getheader("www-authenticate", "")
        error = json.loads(stream.resp.read())["errors"][0]
        assert error["status"] == 401
    finally:
        server.close()


def test_a_listener_refuses_a_taken_port() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(SystemExit) as exc:
            watch.listen_socket("127.0.0.1", port)
    assert "cannot listen on 127.0.0.1:%d for the change feed" % port in str(exc.value)
    conf = make_conf(berth__watch_listen="nowhere")
    with pytest.raises(SystemExit, match="watch_listen must be host:port"):
        watch.listen_address(conf)
    assert watch.listen_address(make_conf(berth__watch_listen="[::1]:8779")) == ("::1", 8779)
    # Unset or empty: no watch, and no port taken that nobody asked for.
    assert watch.listen_address(make_conf()) is None
    assert watch.listen_address(make_conf(berth__watch_listen="")) is None


def test_a_writes_events_resume_as_a_whole(client: Client, watch_feed: FeedServer) -> None:
    rp = new_provider(client, "host")
    allocate(client, rp, str(uuidlib.uuid4()), "p1")
    start = position(client)
    stream = Stream(watch_feed.port, "after=%s&kind=allocations.replaced" % start)
    one, two = str(uuidlib.uuid4()), str(uuidlib.uuid4())
    resp = client.post(
        "/allocations",
        json={
            c: {
                "allocations": {rp: {"resources": {"VCPU": 1}}},
                "project_id": "p1",
                "user_id": "u",
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            }
            for c in (one, two)
        },
    )
    assert resp.status_code == 204, resp.text
    first, second = stream.events(2)
    assert first["position"] == second["position"]  # one write
    # Not the last of its write: resuming from it sends the write whole.
    assert first["after"] == start
    assert second["after"] == second["position"]
    again = Stream(watch_feed.port, "after=%s&kind=allocations.replaced" % first["after"])
    assert [e["subject"] for e in again.events(2)] == [first["subject"], second["subject"]]


def test_after_now_and_berth_watch_url(
    client: Client, watch_feed: FeedServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from berth.cli.run import main

    start = position(client)
    now = Stream(watch_feed.port, "after=now")
    assert now.frame() == {"after": start}
    made = [new_provider(client, "cli%d" % i) for i in range(2)]
    assert [e["subject"] for e in now.events(2)] == made
    url = "http://127.0.0.1:%d" % watch_feed.port
    capsys.readouterr()
    # --once: what there is after the position, up to the first bookmark.
    assert main(["watch", "--url", url, "--once", "--after", start]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["subject"] for e in lines] == made
    assert lines[-1]["after"] == position(client)
    with pytest.raises(SystemExit) as refused:
        main(["watch", "--url", url, "--once", "--after", "1:x"])
    assert str(refused.value).startswith("berth: error: Invalid position")


def test_a_watcher_that_does_not_read_is_ended_and_resumes_whole(
    client: Client, watch_feed: FeedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Anything left in its buffer at the next frame counts as not reading.
    monkeypatch.setattr(feed_mod, "MAX_BUFFERED", 0)
    monkeypatch.setattr(feed_mod, "HEARTBEAT", 0.1)
    rp = big_provider(client)
    start = position(client)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", watch_feed.port))
    conn = http.client.HTTPConnection("127.0.0.1", watch_feed.port, timeout=10)
    conn.sock = sock
    conn.request(
        "GET",
        "%s?after=%s&kind=allocations.replaced" % (watch.PATH, start),
        headers={"x-auth-token": "admin"},
    )
    resp = conn.getresponse()
    running = watch_feed.running.feed
    wait_for(lambda: running.watchers == 1, "the watcher joins")
    ((watcher,),) = running.groups.values()
    # Small kernel buffers both ways: the write below cannot all fit.
    watcher.transport.get_extra_info("socket").setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    consumers = many_claims(client, rp, 400)
    wait_for(lambda: running.watchers == 0, "the slow reader is dropped")
    assert watch_feed.running.feed.metrics.registry.get_sample_value("berth_feed_watchers") == 0
    # What was written before the drop still arrives, then the end.
    got = [json.loads(line) for line in iter(resp.readline, b"")]
    resp.close()
    conn.close()
    got_events = [e for e in got if "kind" in e]
    assert sorted(e["subject"] for e in got_events) == sorted(consumers)
    assert got[-1]["after"] == position(client)
    # Resuming from its last frame: the next write, nothing missed.
    again = Stream(watch_feed.port, "after=%s&kind=allocations.replaced" % got[-1]["after"])
    later = str(uuidlib.uuid4())
    allocate(client, new_provider(client, "other"), later, "p1")
    assert [e["subject"] for e in again.events(1)] == [later]


def test_many_watchers_get_fewer_batches_with_every_event_in_order(
    client: Client, watch_feed: FeedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(feed_mod, "POLL_WATCHERS", 1)
    monkeypatch.setattr(feed_mod, "MAX_POLL", 0.5)
    assert feed_mod.poll_interval(0) == feed_mod.POLL
    assert feed_mod.poll_interval(2) == pytest.approx(2 * feed_mod.POLL)
    assert feed_mod.poll_interval(1000) == 0.5
    start = position(client)
    streams = [Stream(watch_feed.port, "after=" + start) for _ in range(3)]
    streams.append(Stream(watch_feed.port, "after=%s&format=sse" % start))
    wait_for(lambda: watch_feed.running.feed.watchers == 4, "the watchers join")
    made = [new_provider(client, "many%d" % i) for i in range(8)]
    for stream in streams:
        got = stream.events(8)
        assert [e.get("data", e)["subject"] for e in got] == made


def test_an_http_1_0_watcher_gets_the_frames_unchunked(
    client: Client, watch_feed: FeedServer
) -> None:
    start = position(client)
    with socket.create_connection(("127.0.0.1", watch_feed.port), timeout=10) as sock:
        sock.sendall(
            b"GET %s?after=%s HTTP/1.0\r\nx-auth-token: admin\r\n"
            b"\r\n" % (watch.PATH.encode(), start.encode())
        )
        lines = sock.makefile("rb")
        assert b" 200 " in lines.readline()
        headers = list(iter(lines.readline, b"\r\n"))
        assert not any(h.lower().startswith(b"transfer-encoding") for h in headers)
        assert json.loads(lines.readline()) == {"after": start}
        made = new_provider(client, "plain")
        assert json.loads(lines.readline())["subject"] == made


def test_delivery_delay_is_observed_once_per_group_that_got_frames(
    client: Client, watch_feed: FeedServer
) -> None:
    registry = watch_feed.running.feed.metrics.registry

    def sample(suffix: str) -> float:
        return registry.get_sample_value("berth_feed_delivery_seconds_" + suffix) or 0.0

    start = position(client)
    # Two watchers of one group, and a group whose filter leaves it out.
    same = [Stream(watch_feed.port, "after=" + start) for _ in range(2)]
    other = Stream(watch_feed.port, "after=%s&kind=allocations.replaced" % start)
    for stream in [*same, other]:
        assert stream.frame() == {"after": start}  # joined
    count, total = sample("count"), sample("sum")
    began = time.time()
    uuid = new_provider(client, "timed")  # one write, one event
    for stream in same:
        assert stream.events(1)[0]["subject"] == uuid
    # The feed observes just after its writes, on its own thread.
    wait_for(lambda: sample("count") > count, "the delay is observed")
    ended = time.time()
    # One batch, one group that got it: one observation, whose delay
    # (from the event's stored time to the last write) lies within the
    # window the test saw, on the same clock.
    assert sample("count") - count == 1
    assert 0 < sample("sum") - total <= ended - began
