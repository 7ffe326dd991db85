"""Many clients racing claims against a real multi-worker server.

Proves through the API that no provider ends over capacity, that usages
equal the sum of the claims that succeeded, and that every loser got a
409 with a Placement error code -- never a 5xx.

Covers ``berth.domain.allocation`` (claims) and the retries of
``berth.db.engine`` under ``berth serve`` with several workers.
"""

from __future__ import annotations

import random
import threading
import uuid as uuidlib
from typing import Any

import httpx
import pytest

from berth.db.engine import Database
from support.allocation_setup import PROJECT, USER, make_provider

pytestmark = pytest.mark.stress

THREADS = 10
ROUNDS = 12
TOTAL = 12  # VCPU per provider: scarce, so many claims must lose


class Ledger:
    """What each consumer holds according to the answers received."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.held: dict[str, dict[str, int]] = {}
        self.statuses: list[int] = []
        self.bad: list[str] = []

    def record(self, resp: httpx.Response, writes: dict[str, dict[str, int]]) -> None:
        with self.lock:
            self.statuses.append(resp.status_code)
            if resp.status_code == 204:
                for consumer, held in writes.items():
                    if held:
                        self.held[consumer] = held
                    else:
                        self.held.pop(consumer, None)
            elif resp.status_code != 409 or not str(
                resp.json()["errors"][0].get("code", "")
            ).startswith("placement."):
                self.bad.append("%s %s" % (resp.status_code, resp.text))


def _alloc(rp: str, amount: int) -> dict[str, Any]:
    return {rp: {"resources": {"VCPU": amount}}}


def _worker(url: str, providers: list[str], ledger: Ledger, seed: int) -> None:
    rng = random.Random(seed)
    mine: dict[str, int] = {}  # consumer -> generation, owned by this thread
    headers = {"x-auth-token": "admin", "openstack-api-version": "placement 1.28"}
    owner = {"project_id": PROJECT, "user_id": USER}
    with httpx.Client(base_url=url, headers=headers, timeout=60) as http:
        for _ in range(ROUNDS):
            rp, amount = rng.choice(providers), rng.randint(1, 3)
            if mine and rng.random() < 0.3:
                # Move one of mine to another provider via POST, and claim
                # a new consumer in the same request.
                old, gen = rng.choice(sorted(mine.items()))
                fresh = str(uuidlib.uuid4())
                data = {
                    old: {"allocations": {}, "consumer_generation": gen, **owner},
                    fresh: {
                        "allocations": _alloc(rp, amount),
                        "consumer_generation": None,
                        **owner,
                    },
                }
                resp = http.post("/allocations", json=data)
                ledger.record(resp, {old: {}, fresh: {rp: amount}})
                if resp.status_code == 204:
                    del mine[old]
                    mine[fresh] = 1
                continue
            consumer = str(uuidlib.uuid4())
            resp = http.put(
                "/allocations/" + consumer,
                json={"allocations": _alloc(rp, amount), "consumer_generation": None, **owner},
            )
            ledger.record(resp, {consumer: {rp: amount}})
            if resp.status_code == 204:
                mine[consumer] = 1


def test_racing_claims_never_overcommit(claim_server: tuple[str, Database]) -> None:
    url, db = claim_server
    providers = [make_provider(db, "rp%d" % i, VCPU=TOTAL) for i in range(3)]
    ledger = Ledger()
    threads = [
        threading.Thread(target=_worker, args=(url, providers, ledger, seed))
        for seed in range(THREADS)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not any(thread.is_alive() for thread in threads)
    assert ledger.bad == []
    assert len(ledger.statuses) == THREADS * ROUNDS
    assert 204 in ledger.statuses and 409 in ledger.statuses
    headers = {"x-auth-token": "admin"}
    expected = {rp: 0 for rp in providers}
    for held in ledger.held.values():
        for rp, amount in held.items():
            expected[rp] += amount
    for rp in providers:
        got = httpx.get("%s/resource_providers/%s/usages" % (url, rp), headers=headers).json()[
            "usages"
        ]
        assert got["VCPU"] <= TOTAL
        assert got["VCPU"] == expected[rp]
