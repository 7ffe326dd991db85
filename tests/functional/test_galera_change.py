"""The change feed on the three-node MariaDB Galera cluster (issue 25, "How
it is checked"): a seeded random walk of writes spread over the three
nodes, replayed from the empty database through the feed of one node,
equals the state every node lists; a follower resumes on one node from a
position another node's header gave; pruned history answers 410 on every
node.

Each node is served by a Berth app of its own, in-process (the feed is
plain SQL on each node; ``tests/functional/test_galera.py`` covers the
servers). The walk and its replica are those of
``tests/functional/test_change.py`` (``support/change_feed.py``).
Stress: needs the cluster (``.ci/galera.sh start``).
"""

from __future__ import annotations

import random
import time
from typing import Any

import pytest

from berth.db import events
from berth.db.engine import Database, create_engine
from support.change_feed import Replica, Walk, feed, listed, position
from tests.conftest import Client

pytestmark = pytest.mark.stress

#: Seconds the nodes may take to apply each other's writes.
SYNC_TIMEOUT = 60
#: Pages big enough to hold a whole walk: see
#: test_pages_keep_the_order_across_nodes for why the replays read one.
WHOLE = {"limit": "10000"}


class SpreadWalk(Walk):
    """The random walk, each step sent to a node picked at random: reads
    and writes of one step go to the same node, so a step whose view is
    behind another node's write fails certification or answers 409, as
    a real client's would."""

    def __init__(self, clients: list[Client], rng: random.Random) -> None:
        super().__init__(clients[0], rng)
        self.clients = clients
        self.by_node = [0] * len(clients)

    def step(self) -> None:
        n = self.rng.randrange(len(self.clients))
        self.by_node[n] += 1
        self.client = self.clients[n]
        super().step()


def synced(clients: list[Client]) -> str:
    """Wait until every node reads the same position (every node applied
    every write; no write runs meanwhile) and return it."""
    deadline = time.monotonic() + SYNC_TIMEOUT
    while True:
        seen = {position(c) for c in clients}
        if len(seen) == 1:
            return seen.pop()
        assert time.monotonic() < deadline, "nodes never agreed: %s" % seen
        time.sleep(0.6)  # a worker re-reads the position every 0.5 s


def slots(found: list[dict[str, Any]]) -> dict[int, list[int]]:
    """Each slot's sequence numbers, in the order the feed gave them."""
    by_slot: dict[int, list[int]] = {}
    for event in found:
        slot, seq = (int(x) for x in event["position"].split(":"))
        by_slot.setdefault(slot, []).append(seq)
    return by_slot


@pytest.mark.parametrize("seed", [1, 2])
def test_replay_of_writes_on_every_node_equals_the_state(
    galera_nodes: list[Client], seed: int
) -> None:
    start = synced(galera_nodes)  # the empty database
    walk = SpreadWalk(galera_nodes, random.Random(seed))
    for _ in range(160):
        walk.step()
    end = synced(galera_nodes)
    reader = galera_nodes[seed % len(galera_nodes)]
    got = feed(reader, start, **WHOLE)
    replica = Replica()
    for event in got:
        replica.apply(event)
    want = listed(reader)
    assert want["providers"] and want["consumers"]
    assert replica.state() == want
    for other in galera_nodes:  # every node lists the same
        assert listed(other) == want
    # Writes were numbered on all three nodes (one slot each), and each
    # slot's events come in its own order.
    by_slot = slots(got)
    assert len(by_slot) == len(galera_nodes), (by_slot.keys(), walk.by_node)
    assert all(seqs == sorted(seqs) for seqs in by_slot.values())
    kinds = {e["kind"] for e in got}
    assert {
        events.PROVIDER_CREATED,
        events.INVENTORIES_SET,
        events.TRAITS_SET,
        events.AGGREGATES_SET,
        events.ALLOCATIONS_REPLACED,
    } <= kinds, kinds
    # Nothing after the end, read on any node.
    for other in galera_nodes:
        assert feed(other, end) == []


def test_a_follower_resumes_on_another_node(galera_nodes: list[Client]) -> None:
    """Follow on node 1 from the empty database, stop half way, resume
    on node 3 from the position node 2's header gave: the same state as
    every node lists, and replaying everything again changes nothing."""
    start = synced(galera_nodes)
    walk = SpreadWalk(galera_nodes, random.Random(7))
    for _ in range(60):
        walk.step()
    synced(galera_nodes)
    middle = position(galera_nodes[1])
    replica = Replica()
    for event in feed(galera_nodes[0], start, **WHOLE):
        replica.apply(event)
    for _ in range(60):
        walk.step()
    synced(galera_nodes)
    resumed = feed(galera_nodes[2], middle, **WHOLE)
    assert resumed, "the second half of the walk made no event"
    for event in resumed:
        replica.apply(event)
    want = listed(galera_nodes[0])
    assert replica.state() == want
    for event in feed(galera_nodes[1], start, **WHOLE):  # everything once more
        replica.apply(event)
    assert replica.state() == want


def test_pages_keep_the_order_across_nodes(galera_nodes: list[Client]) -> None:
    """Read page by page (7 events a page), the feed gives the same events
    in the same order as read in one page: the order a reader could see
    the writes in, across the nodes' slots."""
    start = synced(galera_nodes)
    walk = SpreadWalk(galera_nodes, random.Random(1))
    for _ in range(160):
        walk.step()
    synced(galera_nodes)
    whole = feed(galera_nodes[0], start, **WHOLE)
    assert len(slots(whole)) == len(galera_nodes)
    paged = feed(galera_nodes[0], start)  # change_feed's pages of 7
    assert [e["position"] for e in paged] == [e["position"] for e in whole]


def test_pruned_history_is_410_on_every_node(
    galera_nodes: list[Client], galera_db: list[str]
) -> None:
    start = synced(galera_nodes)
    for n, client in enumerate(galera_nodes):  # a write numbered on each node
        resp = client.post("/resource_providers", json={"name": "rp%d" % n})
        assert resp.status_code == 200, resp.text
    before = synced(galera_nodes)
    db = Database(create_engine(galera_db[0]))
    try:
        # Prune every slot's events written so far (as the writes' flush
        # does once the retention passed), from one node.
        numbered = [int(pair.split(":")[0]) for pair in before.split(",")]
        assert len(numbered) == len(galera_nodes), before
        db.run(lambda conn: [events.prune(conn, slot, time.time() + 1) for slot in numbered])
    finally:
        db.engine.dispose()
    deadline = time.monotonic() + SYNC_TIMEOUT
    for client in galera_nodes:
        while True:
            resp = client.get("/berth/changes", params={"after": start})
            if resp.status_code == 410 or time.monotonic() > deadline:
                break
            time.sleep(0.2)  # the prune not applied yet
        assert resp.status_code == 410, resp.text
        error = resp.json()["errors"][0]
        assert error["code"] == "berth.changes.gone"
        assert error["oldest_position"] == before
        # From the oldest position kept, reading on works, on every node.
        assert feed(client, error["oldest_position"]) == []
    # A position none of the nodes reached is no better.
    slot, seq = (int(x) for x in before.split(",")[0].split(":"))
    ahead = ",".join(["%d:%d" % (slot, seq + 5)] + before.split(",")[1:])
    for client in galera_nodes:
        assert client.get("/berth/changes", params={"after": ahead}).status_code == 410
