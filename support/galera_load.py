"""Racing writes through several Berth servers, and the checks on them.

Used by the Galera race and node-kill tests and by ``bench/galera.py``.
``servers`` starts one ``berth serve`` per database URL. ``run_load``
sends a random mix of writes from many client threads, spread over the
servers, for a fixed time: claims of new consumers, guarded updates of
its own consumers, moves and multi-consumer claims (``POST
/allocations``), frees, reshapes (``POST /reshaper``: an inventory change
and an allocation move in one request), and guarded updates of a few
consumers every thread fights over. A ``Monitor`` thread samples every
node's SQL meanwhile for over-allocation.

The ``Ledger`` keeps what each acknowledged write said, so that after the
load every node can be compared with it (``support/galera_checks.py``).
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
import uuid as uuidlib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from berth.db import setup
from berth.db.engine import create_engine
from support.galera import Cluster

# The checks are the load's too: its tests and bench/galera.py name them
# from here.
from support.galera_checks import Allocs, Ledger
from support.galera_checks import Monitor as Monitor
from support.galera_checks import check_ledger as check_ledger
from support.galera_checks import node_state as node_state
from support.galera_checks import twice_accepted as twice_accepted
from support.processes import free_port, stop_group, wait_ready

HEADERS = {
    "x-auth-token": "admin",
    "x-roles": "admin,service",
    "accept": "application/json",
    "openstack-api-version": "placement 1.39",
}
PROJECT = "6a0a4d9c-0e8c-4d35-a7b4-5d5f3a0e0a01"
USER = "0b7a2f4e-3f7e-4a61-9a55-d1d6b0b7a001"
OWNER = {"project_id": PROJECT, "user_id": USER}
#: VCPU per provider: scarce, so that many claims must lose.
TOTAL = 24
#: The consumers every thread fights over (guarded updates only).
SHARED = 4


@contextmanager
def fresh_database(cluster: Cluster) -> Iterator[list[str]]:
    """A new migrated database on the cluster, dropped afterwards: its URL
    on each node."""
    name = "berth_galera_%s" % uuidlib.uuid4().hex[:8]
    cluster.create_database(name)
    try:
        urls = [node.url(name) for node in cluster.nodes]
        engine = create_engine(urls[0])
        setup.prepare(engine)
        engine.dispose()
        yield urls
    finally:
        cluster.drop_database(name)


@contextmanager
def servers(
    db_urls: list[str], tmp: Path, *, workers: int = 2, cache: bool = True, debug: bool = False
) -> Iterator[list[str]]:
    """One ``berth serve`` per URL in ``db_urls``; yields their base URLs."""
    berth = Path(sys.executable).with_name("berth")
    procs: list[subprocess.Popen[bytes]] = []
    urls: list[str] = []
    try:
        for n, db_url in enumerate(db_urls):
            conf = tmp / ("placement%d.conf" % n)
            conf.write_text(
                "[DEFAULT]\ndebug = %s\n[api]\nauth_strategy = noauth2\n"
                "[placement_database]\nconnection = %s\n"
                "[berth]\nrequest_log = false\ncandidate_cache = %s\n" % (debug, db_url, cache)
            )
            port = free_port()
            with open(tmp / ("server%d.log" % n), "wb") as log:
                procs.append(
                    subprocess.Popen(
                        [
                            str(berth),
                            "serve",
                            "--config-file",
                            str(conf),
                            "--host",
                            "127.0.0.1",
                            "--port",
                            str(port),
                            "--workers",
                            str(workers),
                        ],
                        stdout=subprocess.DEVNULL,
                        stderr=log,
                        start_new_session=True,
                    )
                )
            urls.append("http://127.0.0.1:%d" % port)
        for url, proc in zip(urls, procs, strict=True):
            wait_ready(url, proc)
        yield urls
    finally:
        for proc in procs:
            stop_group(proc)


def make_providers(url: str, count: int) -> list[str]:
    """``count`` providers with TOTAL VCPU each, made through ``url``."""
    uuids = []
    with httpx.Client(base_url=url, headers=HEADERS, timeout=60) as http:
        for n in range(count):
            rp = str(uuidlib.uuid4())
            resp = http.post("/resource_providers", json={"name": "galera-rp-%d" % n, "uuid": rp})
            assert resp.status_code == 200, resp.text
            resp = http.put(
                "/resource_providers/%s/inventories" % rp,
                json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": TOTAL}}},
            )
            assert resp.status_code == 200, resp.text
            uuids.append(rp)
    return uuids


def _body(allocs: Allocs, gen: int | None) -> dict[str, Any]:
    return {
        "allocations": {rp: {"resources": {"VCPU": n}} for rp, n in allocs.items()},
        "consumer_generation": gen,
        "consumer_type": "INSTANCE",
        **OWNER,
    }


class Client:
    """One client thread's state: its consumers and their generations."""

    def __init__(
        self,
        http: httpx.Client,
        providers: list[str],
        ledger: Ledger,
        seed: int,
        shared: list[str],
        tolerate_503: bool,
    ) -> None:
        self.http = http
        self.providers = providers
        self.ledger = ledger
        self.rng = random.Random(seed)
        self.shared = shared
        self.tolerate_503 = tolerate_503
        self.mine: dict[str, tuple[int, Allocs]] = {}  # consumer -> gen, allocs

    def _send(self, method: str, url: str, body: Any) -> httpx.Response | None:
        try:
            return self.http.request(method, url, json=body)
        except httpx.HTTPError:
            return None

    def _record(
        self, op: str, resp: httpx.Response | None, writes: dict[str, tuple[int | None, Allocs]]
    ) -> bool:
        ok = self.ledger.record(op, resp, writes, tolerate_503=self.tolerate_503)
        for consumer, (gen, allocs) in writes.items():
            if consumer in self.shared:
                continue
            if ok and allocs:
                self.mine[consumer] = ((gen or 0) + 1, allocs)
            elif ok or consumer in self.ledger.unknown:
                self.mine.pop(consumer, None)
        return ok

    def _some(self) -> Allocs:
        return {self.rng.choice(self.providers): self.rng.randint(1, 3)}

    def step(self) -> None:
        roll = self.rng.random()
        if not self.mine or roll < 0.25:
            self.claim()
        elif roll < 0.40:
            self.update()
        elif roll < 0.55:
            self.move()
        elif roll < 0.65:
            self.claim_two()
        elif roll < 0.80:
            self.free()
        elif roll < 0.87:
            self.reshape()
        else:
            self.fight()

    def claim(self) -> None:
        consumer, allocs = str(uuidlib.uuid4()), self._some()
        resp = self._send("PUT", "/allocations/" + consumer, _body(allocs, None))
        self._record("claim", resp, {consumer: (None, allocs)})

    def _pick(self) -> tuple[str, int, Allocs]:
        consumer = self.rng.choice(sorted(self.mine))
        gen, allocs = self.mine[consumer]
        return consumer, gen, allocs

    def update(self) -> None:
        consumer, gen, _ = self._pick()
        allocs = self._some()
        resp = self._send("PUT", "/allocations/" + consumer, _body(allocs, gen))
        self._record("update", resp, {consumer: (gen, allocs)})

    def move(self) -> None:
        """Empty one of mine and give a fresh consumer the same amount
        elsewhere, in one request (a migration's final step)."""
        old, gen, allocs = self._pick()
        fresh = str(uuidlib.uuid4())
        target = {self.rng.choice(self.providers): sum(allocs.values())}
        resp = self._send("POST", "/allocations", {old: _body({}, gen), fresh: _body(target, None)})
        self._record("move", resp, {old: (gen, {}), fresh: (None, target)})

    def claim_two(self) -> None:
        a, b = str(uuidlib.uuid4()), str(uuidlib.uuid4())
        aa, bb = self._some(), self._some()
        resp = self._send("POST", "/allocations", {a: _body(aa, None), b: _body(bb, None)})
        self._record("claim_two", resp, {a: (None, aa), b: (None, bb)})

    def free(self) -> None:
        consumer, gen, _ = self._pick()
        resp = self._send("DELETE", "/allocations/" + consumer, None)
        # DELETE is not generation-guarded; ``gen`` (the generation no
        # write has used yet) only keeps the ledger's pairs unique.
        self._record("free", resp, {consumer: (gen, {})})

    def reshape(self) -> None:
        """Move one of mine to another provider while changing that
        provider's inventory (its max_unit, which leaves capacity alone),
        in one ``POST /reshaper``; up to three tries, since claims move
        the provider's generation all the time."""
        consumer, gen, allocs = self._pick()
        target = self.rng.choice(self.providers)
        moved = {target: sum(allocs.values())}
        for _ in range(3):
            resp = self._send("GET", "/resource_providers/%s/inventories" % target, None)
            if resp is None or resp.status_code != 200:
                self._record("reshape", resp, {})
                return
            rp_gen = resp.json()["resource_provider_generation"]
            max_unit = resp.json()["inventories"]["VCPU"]["max_unit"]
            resp = self._send(
                "POST",
                "/reshaper",
                {
                    "inventories": {
                        target: {
                            "resource_provider_generation": rp_gen,
                            "inventories": {
                                "VCPU": {
                                    "total": TOTAL,
                                    "max_unit": TOTAL if max_unit != TOTAL else TOTAL // 2,
                                }
                            },
                        }
                    },
                    "allocations": {consumer: _body(moved, gen)},
                },
            )
            if self._record("reshape", resp, {consumer: (gen, moved)}) or consumer not in self.mine:
                return

    def fight(self) -> None:
        """A guarded update of a consumer every thread writes, at the
        generation just read (through this thread's server)."""
        consumer = self.rng.choice(self.shared)
        resp = self._send("GET", "/allocations/" + consumer, None)
        if resp is None or resp.status_code != 200:
            self._record("fight", resp, {})
            return
        gen = resp.json().get("consumer_generation")
        allocs = {self.rng.choice(self.providers): 1}
        resp = self._send("PUT", "/allocations/" + consumer, _body(allocs, gen))
        self._record("fight", resp, {consumer: (gen, allocs)})


def seed_shared(url: str, providers: list[str], ledger: Ledger) -> list[str]:
    """Create the SHARED consumers every thread will fight over."""
    shared = []
    with httpx.Client(base_url=url, headers=HEADERS, timeout=60) as http:
        for n in range(SHARED):
            consumer = str(uuidlib.uuid4())
            allocs = {providers[n % len(providers)]: 1}
            ledger.shared[consumer] = {}
            assert ledger.record(
                "seed",
                http.put("/allocations/" + consumer, json=_body(allocs, None)),
                {consumer: (None, allocs)},
            )
            shared.append(consumer)
    return shared


def run_load(
    urls: list[str],
    providers: list[str],
    ledger: Ledger,
    *,
    threads: int,
    seconds: float,
    shared: list[str],
    tolerate_503: bool = False,
) -> None:
    """``threads`` clients, spread round-robin over ``urls``, writing for
    ``seconds``."""
    stop_at = time.monotonic() + seconds

    def work(n: int) -> None:
        with httpx.Client(base_url=urls[n % len(urls)], headers=HEADERS, timeout=90) as http:
            client = Client(http, providers, ledger, n, shared, tolerate_503)
            while time.monotonic() < stop_at:
                client.step()

    pool = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join(seconds + 180)
    assert not any(thread.is_alive() for thread in pool), "clients hung"


def usages_match(url: str, providers: list[str], state: dict[str, Allocs]) -> list[str]:
    """Providers whose usage (through ``url``) is not the sum of ``state``."""
    expected = dict.fromkeys(providers, 0)
    for allocs in state.values():
        for rp, used in allocs.items():
            expected[rp] = expected.get(rp, 0) + used
    problems = []
    with httpx.Client(base_url=url, headers=HEADERS, timeout=60) as http:
        for rp in providers:
            got = http.get("/resource_providers/%s/usages" % rp).json()
            if got["usages"].get("VCPU", 0) != expected[rp]:
                problems.append(
                    "%s via %s: usage %s, allocations sum %s"
                    % (rp, url, got["usages"], expected[rp])
                )
    return problems
