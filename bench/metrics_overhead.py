"""CPU per request of a mix of cheap and typical requests, in-process.

Used to measure what the metrics cost: run it against two source trees
(``PYTHONPATH=<tree>/src``), e.g. this one and a checkout from before the
metrics, alternating, and compare the medians::

    git worktree add /tmp/before <commit-before-metrics>
    for i in 1 2 3; do
      PYTHONPATH=/tmp/before/src .venv/bin/python bench/metrics_overhead.py
      .venv/bin/python bench/metrics_overhead.py
    done

The mix, per round: GET a provider, GET /allocation_candidates with
``limit=5`` over 200 hosts, a claim (PUT /allocations) and its delete.
Reports the median over rounds of process CPU (user + system) per request
in microseconds, and which ``berth`` it imported.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

import berth
from berth import conf as berth_conf
from berth.api.app import create_app
from berth.db.engine import Database, create_engine


def _prepare(engine: Any) -> None:
    try:
        from berth.db import setup

        setup.prepare(engine)
    except (ImportError, AttributeError):  # a tree from before setup.prepare
        from berth.db import migrate

        migrate.upgrade(engine)


def _client(path: Path) -> httpx.Client:
    conf = berth_conf.load([])
    conf.set_override("auth_strategy", "noauth2", group="api")
    conf.set_override("request_log", False, group="berth")
    engine = create_engine("sqlite:///%s" % path)
    _prepare(engine)
    app = create_app(conf, Database(engine))
    return httpx.Client(
        transport=httpx.WSGITransport(app=app),
        base_url="http://b.test",
        headers={"x-auth-token": "admin", "openstack-api-version": "placement 1.39"},
    )


def _hosts(client: httpx.Client, count: int) -> list[str]:
    uuids = []
    for n in range(count):
        rp = str(uuid.UUID(int=n + 1))
        client.post("/resource_providers", json={"name": "h%d" % n, "uuid": rp})
        client.put(
            "/resource_providers/%s/inventories" % rp,
            json={
                "resource_provider_generation": 0,
                "inventories": {"VCPU": {"total": 64}, "MEMORY_MB": {"total": 65536}},
            },
        )
        uuids.append(rp)
    return uuids


def _round(client: httpx.Client, rp: str) -> int:
    consumer = str(uuid.uuid4())
    assert client.get("/resource_providers/%s" % rp).status_code == 200
    assert (
        client.get("/allocation_candidates?resources=VCPU:1,MEMORY_MB:512&limit=5").status_code
        == 200
    )
    assert (
        client.put(
            "/allocations/%s" % consumer,
            json={
                "allocations": {rp: {"resources": {"VCPU": 1}}},
                "project_id": "p",
                "user_id": "u",
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            },
        ).status_code
        == 204
    )
    assert client.delete("/allocations/%s" % consumer).status_code == 204
    return 4


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=300)
    ap.add_argument("--samples", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=50)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        client = _client(Path(folder) / "p.sqlite")
        uuids = _hosts(client, args.hosts)
        for n in range(args.warmup):  # whole load, caches, imports
            _round(client, uuids[n % len(uuids)])
        per_request = []
        for _ in range(args.samples):
            start = time.process_time()
            done = sum(_round(client, uuids[n % len(uuids)]) for n in range(args.rounds))
            per_request.append((time.process_time() - start) / max(done, 1) * 1e6)
    print(
        "%s: median %.1f us CPU per request (samples: %s)"
        % (
            Path(berth.__file__).parent.parent,
            statistics.median(per_request),
            " ".join("%.0f" % v for v in per_request),
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
