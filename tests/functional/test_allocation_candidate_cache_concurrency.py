"""Workers' candidate caches stay fresh under concurrent writes.

Two ``berth serve`` processes with two or eight workers each (four or
sixteen caches) share one database. Each client thread owns one provider: it claims, frees and
resizes through one server, then at once asks the *other* server for
candidates in its provider's tree. Whatever the other threads are writing
meanwhile, the answer must show exactly the usage and capacity the thread
itself just committed: a cache that missed a change shows up as a
mismatch.

Covers ``berth.domain.allocation_candidate.cache`` and
``berth.db.changes`` across worker processes.
"""

from __future__ import annotations

import random
import threading
import uuid as uuidlib

import httpx
import pytest

pytestmark = pytest.mark.stress

THREADS = 6
STEPS = 25
HEADERS = {
    "x-auth-token": "admin",
    "accept": "application/json",
    "openstack-api-version": "placement 1.39",
}


def _owner(urls: list[str], n: int, failures: list[str]) -> None:
    rnd = random.Random(n)
    clients = [httpx.Client(base_url=u, headers=HEADERS, timeout=60) for u in urls]
    rp = str(uuidlib.uuid4())
    write = clients[n % 2]
    read = clients[1 - n % 2]
    assert (
        write.post("/resource_providers", json={"name": "owner-%d" % n, "uuid": rp}).status_code
        == 200
    )
    total, generation = 64, 0
    resp = write.put(
        "/resource_providers/%s/inventories" % rp,
        json={
            "resource_provider_generation": generation,
            "inventories": {"VCPU": {"total": total}},
        },
    )
    assert resp.status_code == 200, resp.text
    generation = resp.json()["resource_provider_generation"]
    held: dict[str, int] = {}
    for step in range(STEPS):
        action = rnd.random()
        if (action < 0.5 or not held) and sum(held.values()) < 40:
            consumer, amount = str(uuidlib.uuid4()), rnd.randint(1, 3)
            resp = write.put(
                "/allocations/%s" % consumer,
                json={
                    "allocations": {rp: {"resources": {"VCPU": amount}}},
                    "project_id": "p",
                    "user_id": "u",
                    "consumer_generation": None,
                    "consumer_type": "INSTANCE",
                },
            )
            assert resp.status_code == 204, resp.text
            held[consumer] = amount
        elif action < 0.8 and held:
            consumer = rnd.choice(sorted(held))
            assert write.delete("/allocations/%s" % consumer).status_code == 204
            del held[consumer]
        else:
            generation = write.get("/resource_providers/%s" % rp).json()["generation"]
            total = rnd.choice([48, 64, 80])
            resp = write.put(
                "/resource_providers/%s/inventories" % rp,
                json={
                    "resource_provider_generation": generation,
                    "inventories": {"VCPU": {"total": total}},
                },
            )
            assert resp.status_code == 200, resp.text
        used = sum(held.values())
        resp = read.get("/allocation_candidates?resources=VCPU:1&in_tree=" + rp)
        assert resp.status_code == 200, resp.text
        seen = resp.json()["provider_summaries"].get(rp, {}).get("resources", {}).get("VCPU")
        if seen != {"capacity": total, "used": used}:
            failures.append(
                "thread %d step %d: expected %s/%s, saw %s" % (n, step, used, total, seen)
            )
        if total - used < 1:
            continue
        # The same query shape from every thread: each worker's candidate
        # memo must drop exactly the trees other threads' writes touched.
        resp = read.get("/allocation_candidates?resources=VCPU:%d" % (total - used))
        assert resp.status_code == 200, resp.text
        seen = resp.json()["provider_summaries"].get(rp, {}).get("resources", {}).get("VCPU")
        if seen != {"capacity": total, "used": used}:
            failures.append(
                "thread %d step %d: with %d free, saw %s" % (n, step, total - used, seen)
            )
        listed = read.get("/resource_providers?resources=VCPU:%d" % (total - used)).json()[
            "resource_providers"
        ]
        if rp not in {p["uuid"] for p in listed}:
            failures.append("thread %d step %d: not listed with %d free" % (n, step, total - used))


def test_other_workers_see_each_committed_write(cache_servers: list[str]) -> None:
    failures: list[str] = []
    errors: list[BaseException] = []

    def run(n: int) -> None:
        try:
            _owner(cache_servers, n, failures)
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(n,)) for n in range(THREADS)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert not failures, failures[:10]
