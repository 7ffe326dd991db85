"""Berth on a three-node MariaDB Galera cluster, writes on every node.

One ``berth serve`` per node; client threads write through all three at
once (see ``support/galera_load.py`` for the mix). Galera certifies
writes at commit, so two nodes changing the same rows conflict only
then, as error 1213, which Berth retries. Checked: no 5xx, no
over-allocation in any sample of any node, every acknowledged write on
every node afterwards, usages equal to the sum of allocations, and no
consumer generation accepted twice. Then one node is killed mid-load and
restarted: the other servers keep serving, the orphaned server answers
503 (fast, in the Placement format) and recovers, nothing acknowledged is
lost and the node catches up.

Covers the retries of ``berth.db.engine`` (certification failures) and
the domain writes on Galera; the cluster is ``support/galera.py``.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import httpx
import pytest

from support import galera_load as load
from support.galera import Cluster

pytestmark = pytest.mark.stress

THREADS = 12
#: The node-kill test: load for this long, kill a node after KILL_AFTER
#: seconds, restart it DOWN_FOR seconds later.
KILL_LOAD_SECONDS = 40
KILL_AFTER = 8
DOWN_FOR = 10
#: An answer slower than this counts as a hang.
PROBE_TIMEOUT = 30
SECONDS = int(os.environ.get("BERTH_GALERA_SECONDS", "30"))


def check_after_load(
    db_urls: list[str], urls: list[str], providers: list[str], ledger: load.Ledger
) -> None:
    """Every node agrees with the ledger and with every other node."""
    states = [load.node_state(u) for u in db_urls]
    for n, state in enumerate(states):
        assert load.check_ledger(ledger, state) == [], "node %d" % (n + 1)
        assert state == states[0]
    for url in urls:
        assert load.usages_match(url, providers, states[0]) == []
    assert load.twice_accepted(ledger) == []
    with httpx.Client(headers=load.HEADERS, timeout=60) as http:
        for consumer, by_gen in ledger.shared.items():
            if consumer in ledger.unknown:
                continue
            got = http.get("%s/allocations/%s" % (urls[-1], consumer)).json()
            # One generation step per accepted write: none was lost and
            # none was applied on top of a stale generation.
            assert got["consumer_generation"] == len(by_gen)


def test_racing_writes_on_every_node(galera_db: list[str], tmp_path: Path) -> None:
    with load.servers(galera_db, tmp_path) as urls:
        providers = load.make_providers(urls[0], 4)
        ledger = load.Ledger()
        shared = load.seed_shared(urls[1], providers, ledger)
        monitor = load.Monitor(galera_db)
        monitor.start()
        try:
            load.run_load(urls, providers, ledger, threads=THREADS, seconds=SECONDS, shared=shared)
        finally:
            monitor.stop()
        # Shown with -s: the figures docs/reliability.md quotes.
        print(
            "\ngalera race: %d acknowledged writes in %ss, answers %s, "
            "by operation %s, %d monitor samples"
            % (ledger.writes, SECONDS, ledger.statuses, ledger.by_op, monitor.samples)
        )
        assert ledger.bad == []
        assert monitor.samples > 0 and monitor.over == []
        assert ledger.statuses.get(409, 0) > 0
        for op in ("claim", "update", "move", "claim_two", "free", "reshape", "fight"):
            assert ledger.by_op.get(op, 0) > 0, (op, ledger.by_op)
        check_after_load(galera_db, urls, providers, ledger)


class Probe(threading.Thread):
    """Asks one server for its providers every 0.2 s and keeps what it got
    back and how long each answer took."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.answers: list[tuple[float, int, float]] = []  # when, status, took
        self.bad: list[str] = []
        self._halt = threading.Event()

    def run(self) -> None:
        with httpx.Client(base_url=self.url, headers=load.HEADERS, timeout=PROBE_TIMEOUT) as http:
            while not self._halt.is_set():
                start = time.monotonic()
                try:
                    resp = http.get("/resource_providers")
                except httpx.HTTPError as exc:
                    self.bad.append("no answer: %r" % exc)
                    continue
                took = time.monotonic() - start
                self.answers.append((start, resp.status_code, took))
                if resp.status_code == 503:
                    error = resp.json()["errors"][0]
                    if error["status"] != 503 or "code" not in error:
                        self.bad.append(resp.text)
                elif resp.status_code != 200:
                    self.bad.append("%s %s" % (resp.status_code, resp.text))
                self._halt.wait(0.2)

    def stop(self) -> None:
        self._halt.set()
        self.join(PROBE_TIMEOUT + 5)


def test_a_node_dies_under_load_and_rejoins(
    galera_cluster: Cluster, galera_db: list[str], tmp_path: Path
) -> None:
    victim = galera_cluster.nodes[2]
    with load.servers(galera_db, tmp_path) as urls:
        providers = load.make_providers(urls[0], 4)
        ledger = load.Ledger()
        shared = load.seed_shared(urls[0], providers, ledger)
        monitor, probe = load.Monitor(galera_db), Probe(urls[2])
        writer = threading.Thread(
            target=load.run_load,
            kwargs=dict(
                urls=urls,
                providers=providers,
                ledger=ledger,
                threads=9,
                seconds=KILL_LOAD_SECONDS,
                shared=shared,
                tolerate_503=True,
            ),
        )
        monitor.start()
        probe.start()
        writer.start()
        try:
            time.sleep(KILL_AFTER)
            before = ledger.writes
            victim.kill()
            killed_at = time.monotonic()
            time.sleep(DOWN_FOR)
            during = ledger.writes - before
            # Until here the node is certainly down. Once restarted it may
            # reach Synced (and the server answer 200) a poll or two before
            # start() sees it, so the window of expected 503s ends here.
            restarting_at = time.monotonic()
            victim.start()  # rejoins by IST (or SST) and waits for Synced
            back_at = time.monotonic()
            writer.join(KILL_LOAD_SECONDS + 180)
            time.sleep(2)
        finally:
            probe.stop()
            monitor.stop()
        assert not writer.is_alive()
        assert ledger.bad == []
        assert monitor.over == []
        # The servers on the live nodes kept acknowledging writes.
        assert during > 0
        # The orphaned server answered 503 quickly while its node was
        # down, and 200 again once it was back.
        assert probe.bad == []
        down = [
            (s, took)
            for when, s, took in probe.answers
            if killed_at + 1 < when < restarting_at - 0.5
        ]
        print(
            "\ngalera node kill: %d writes acknowledged while the node was "
            "down; the orphaned server answered %d probes, slowest %.3f s; "
            "answers %s"
            % (during, len(down), max((t for _, t in down), default=0.0), ledger.statuses)
        )
        # Any other answer, by seconds after the kill (restarted at
        # restarting_at - killed_at).
        others = [
            (round(when - killed_at, 2), s)
            for when, s, _ in probe.answers
            if killed_at + 1 < when < restarting_at - 0.5 and s != 503
        ]
        assert down and not others, (others, restarting_at - killed_at)
        assert max(took for _, took in down) < PROBE_TIMEOUT / 2
        assert any(s == 200 for when, s, _ in probe.answers if when > back_at)
        assert ledger.statuses.get(503, 0) > 0
        check_after_load(galera_db, urls, providers, ledger)
