"""The change feed (``GET /berth/changes``, docs/change-feed.md): every
read says its position; replaying the events after a listing's position
rebuilds the state exactly (a random walk of every kind of write, a
reshape); events carry their old and new values; pruned history answers
410; ``berth watch --once`` prints the events as JSON lines. Filters and
policy: test_change_filters.py; refused queries: test_change_queries.py.
The walk and the replica are in support/change_feed.py."""

from __future__ import annotations

import random
import time
import uuid as uuidlib
from typing import Any

import pytest

from berth.db import events
from berth.db.engine import Database
from support.change_feed import Replica, Walk, feed, listed, position, two_trees
from tests.conftest import Client


@pytest.mark.parametrize("seed", [1, 2])
def test_replayed_events_rebuild_the_state(client: Client, seed: int) -> None:
    start = position(client)
    walk = Walk(client, random.Random(seed))
    for _ in range(160):
        walk.step()
    replica = Replica()
    got = feed(client, start)
    for event in got:
        replica.apply(event)
    want = listed(client)
    assert want["providers"], "the walk made no provider"
    assert want["consumers"], "the walk made no consumer"
    assert replica.state() == want
    # The walk made every kind of write (the seeds are chosen so).
    assert {e["kind"] for e in got} == set(events.KINDS) - {events.RESYNC}
    # Events are in order and each write's events under one position.
    seqs = [tuple(map(int, e["position"].split(":"))) for e in got]
    assert seqs == sorted(seqs)


def test_replay_from_a_middle_position_is_idempotent(client: Client) -> None:
    """A listing taken at some position, then the events after it,
    gives the same state as replaying everything (and replaying events
    the listing already reflects changes nothing)."""
    start = position(client)
    walk = Walk(client, random.Random(7))
    for _ in range(40):
        walk.step()
    middle = position(client)
    replica = Replica()
    for event in feed(client, start):
        replica.apply(event)
    for _ in range(40):
        walk.step()
    for event in feed(client, middle):
        replica.apply(event)
    again = feed(client, start)
    for event in again:  # everything once more: nothing changes
        replica.apply(event)
    assert replica.state() == listed(client)


def test_every_read_says_its_position(client: Client) -> None:
    before = position(client)
    resp = client.post("/resource_providers", json={"name": "one"})
    assert resp.status_code == 200
    after = position(client)
    assert after != before
    events_after = feed(client, before)
    assert [e["kind"] for e in events_after] == [events.PROVIDER_CREATED]
    assert events_after[0]["position"] == after
    assert feed(client, after) == []
    for url in ("/", "/resource_providers", "/traits", "/usages?project_id=x"):
        assert client.get(url).headers["berth-position"] == after


def test_events_carry_old_and_new_values(client: Client) -> None:
    rp = client.post("/resource_providers", json={"name": "a"}).json()
    start = position(client)
    client.put(
        "/resource_providers/%s/traits" % rp["uuid"],
        json={"resource_provider_generation": 0, "traits": ["HW_CPU_X86_AVX2"]},
    )
    client.put("/resource_providers/%s" % rp["uuid"], json={"name": "b"})
    client.put(
        "/resource_providers/%s/traits" % rp["uuid"],
        json={"resource_provider_generation": 1, "traits": []},
    )
    got = feed(client, start)
    assert [(e["kind"], e["old"], e["new"]) for e in got] == [
        (
            events.TRAITS_SET,
            {"generation": 0, "traits": []},
            {"generation": 1, "traits": ["HW_CPU_X86_AVX2"]},
        ),
        (
            events.PROVIDER_UPDATED,
            {
                "name": "a",
                "generation": 1,
                "parent_provider_uuid": None,
                "root_provider_uuid": rp["uuid"],
            },
            {
                "name": "b",
                "generation": 1,
                "parent_provider_uuid": None,
                "root_provider_uuid": rp["uuid"],
            },
        ),
        (
            events.TRAITS_SET,
            {"generation": 1, "traits": ["HW_CPU_X86_AVX2"]},
            {"generation": 2, "traits": []},
        ),
    ]


def test_an_owner_change_shows_the_old_owner_as_old(client: Client) -> None:
    root, other, consumer = two_trees(client)
    child = client.get("/resource_providers", params={"in_tree": root}).json()["resource_providers"]
    child_uuid = next(p["uuid"] for p in child if p["uuid"] != root)
    start = position(client)
    for project, user, allocations in (
        ("proj-b", "v", {other: {"resources": {"VCPU": 1}}}),
        ("proj-a", "u", {}),
    ):
        generation = client.get("/allocations/%s" % consumer).json()["consumer_generation"]
        resp = client.put(
            "/allocations/%s" % consumer,
            json={
                "allocations": allocations,
                "project_id": project,
                "user_id": user,
                "consumer_generation": generation,
                "consumer_type": "MIGRATION",
            },
        )
        assert resp.status_code == 204, resp.text
    got = feed(client, start, consumer=consumer)
    assert [(e["kind"], e["old"]) for e in got] == [
        (
            events.ALLOCATIONS_REPLACED,
            {
                "allocations": {child_uuid: {"VCPU": 2}},
                "project_id": "proj-a",
                "user_id": "u",
                "consumer_type": "INSTANCE",
            },
        ),
        (
            events.ALLOCATIONS_REMOVED,
            {
                "allocations": {other: {"VCPU": 1}},
                "project_id": "proj-b",
                "user_id": "v",
                "consumer_type": "MIGRATION",
            },
        ),
    ]
    assert (
        got[0]["new"]["project_id"],
        got[0]["new"]["user_id"],
        got[0]["new"]["consumer_type"],
    ) == ("proj-b", "v", "MIGRATION")


def test_pruned_history_is_410(client: Client, db: Database) -> None:
    start = position(client)
    client.post("/resource_providers", json={"name": "gone"})
    middle = position(client)
    client.post("/resource_providers", json={"name": "kept"})
    # Prune everything written before now, as a write's flush does once
    # the retention has passed.
    slot, seq = (int(x) for x in middle.split(":"))
    db.run(lambda conn: events.prune(conn, slot, time.time() + 1))
    resp = client.get("/berth/changes", params={"after": start})
    assert resp.status_code == 410, resp.text
    error = resp.json()["errors"][0]
    assert error["code"] == "berth.changes.gone"
    newest = position(client)
    assert error["oldest_position"] == newest
    assert newest in error["detail"]
    # From the oldest position kept, reading on works (nothing newer).
    assert feed(client, newest) == []
    # A position the database never reached is no better.
    slot, seq = (int(x) for x in newest.split(":"))
    resp = client.get("/berth/changes", params={"after": "%d:%d" % (slot, seq + 5)})
    assert resp.status_code == 410


def test_retention_prunes_on_write(conf: Any, db: Database) -> None:
    """Every PRUNE_EVERY-th write prunes events older than the retention
    (here 0 seconds: everything before that write)."""
    from berth.api.app import create_app
    from berth.db import changes

    conf.set_override("change_feed_retention", 0, group="berth")
    client = Client(create_app(conf, db))
    start = position(client)
    slot, seq = (int(x) for x in start.split(":")) if start != "0" else (1, 0)
    for i in range(changes.PRUNE_EVERY - seq % changes.PRUNE_EVERY):
        client.put("/traits/CUSTOM_PRUNE_%d" % i)
    resp = client.get("/berth/changes", params={"after": start})
    assert resp.status_code == 410
    assert resp.json()["errors"][0]["oldest_position"] == position(client)


def test_a_reshape_replays(client: Client) -> None:
    """Inventories and allocations moved in one transaction: their
    events rebuild the state, generations included."""
    start = position(client)
    root = client.post("/resource_providers", json={"name": "cn"}).json()
    client.put(
        "/resource_providers/%s/inventories" % root["uuid"],
        json={
            "resource_provider_generation": 0,
            "inventories": {"VCPU": {"total": 8}, "DISK_GB": {"total": 100}},
        },
    )
    consumer = str(uuidlib.uuid4())
    resp = client.put(
        "/allocations/%s" % consumer,
        json={
            "allocations": {root["uuid"]: {"resources": {"VCPU": 2, "DISK_GB": 10}}},
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        },
    )
    assert resp.status_code == 204, resp.text
    child = client.post(
        "/resource_providers", json={"name": "numa0", "parent_provider_uuid": root["uuid"]}
    ).json()
    generation = client.get("/resource_providers/%s" % root["uuid"]).json()["generation"]
    resp = client.post(
        "/reshaper",
        headers={"x-roles": "service"},
        json={
            "inventories": {
                root["uuid"]: {
                    "resource_provider_generation": generation,
                    "inventories": {"DISK_GB": {"total": 100}},
                },
                child["uuid"]: {
                    "resource_provider_generation": 0,
                    "inventories": {"VCPU": {"total": 8}},
                },
            },
            "allocations": {
                consumer: {
                    "allocations": {
                        root["uuid"]: {"resources": {"DISK_GB": 10}},
                        child["uuid"]: {"resources": {"VCPU": 2}},
                    },
                    "project_id": "p",
                    "user_id": "u",
                    "consumer_generation": 1,
                    "consumer_type": "INSTANCE",
                }
            },
        },
    )
    assert resp.status_code == 204, resp.text
    replica = Replica()
    got = feed(client, start)
    for event in got:
        replica.apply(event)
    assert replica.state() == listed(client)
    # The reshape is one write: its events share one position.
    last = [e for e in got if e["position"] == got[-1]["position"]]
    assert sorted(e["kind"] for e in last) == [
        events.ALLOCATIONS_REPLACED,
        events.INVENTORIES_SET,
        events.INVENTORIES_SET,
    ]


def test_berth_watch_prints_json_lines(tmp_path: Any, capsys: Any) -> None:
    """``berth watch --once`` over the configured database: one JSON line
    per event, each with the position to resume from after it; a
    position the database never reached is one error line."""
    import json

    from berth import conf as berth_conf
    from berth.cli.run import main
    from berth.direct import PlacementDirect

    conf_file = tmp_path / "placement.conf"
    conf_file.write_text(
        "[api]\nauth_strategy = noauth2\n"
        "[placement_database]\nconnection = sqlite:///%s\n" % (tmp_path / "watch.sqlite")
    )
    args = ["--config-file", str(conf_file)]
    assert main(["db", "sync", *args]) == 0
    with PlacementDirect(berth_conf.load(args), microversion="latest") as h:
        start = h.get("/").headers["berth-position"]
        a = h.post("/resource_providers", json={"name": "a"}).json()
        h.put("/traits/CUSTOM_WATCHED")
        h.post("/resource_providers", json={"name": "b"})
    capsys.readouterr()
    assert main(["watch", "--once", "--after", start, *args]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(e["kind"], e["subject"]) for e in lines[:2]] == [
        (events.PROVIDER_CREATED, a["uuid"]),
        (events.TRAIT_CREATED, "CUSTOM_WATCHED"),
    ]
    assert len(lines) == 3
    assert (
        main(["watch", "--once", "--after", lines[0]["after"], "--kind", "provider.created", *args])
        == 0
    )
    again = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["new"]["name"] for e in again] == ["b"]
    with pytest.raises(SystemExit) as bad:
        main(["watch", "--once", "--after", "1:999", *args])
    assert "is ahead of this database" in str(bad.value)
