"""Memory and start-up of ``berth serve`` on a world already built.

    .venv/bin/python bench/bulk.py --hosts 50000 --allocations 500000 \\
        --url sqlite:////tmp/w50k.sqlite
    .venv/bin/python bench/startup.py --url sqlite:////tmp/w50k.sqlite \\
        --workers 2 8

For each worker count, a fresh ``berth serve`` (``BERTH_VENV``):

- **first answer**: seconds from starting the server (after ``berth db
  sync``) to its first allocation-candidates answer;
- **memory** once every worker has answered: the largest worker RSS, the
  smallest part of a worker's RSS shared with other processes, the sum of
  the workers' PSS (their true total), and the master's PSS;
- **worker start**: every worker is killed, and the seconds from the
  kill to the first candidates answer of their replacements (gunicorn
  forks them at once): a worker's start;
- **worker start after a new provider**: the same after one provider is
  created (a change since the master's load, which the master catches
  up on before it forks the new workers);
- **worker start after a gap** (``--gap``): as above, after more change
  rows than a worker can catch up on (``changes.KEEP // 2``), so the new
  workers load the world whole;
- **memory after a scheduler's workload** (``--workload N``): N requests
  of each benchmark query with ``limit=1000`` (Nova's default
  ``max_placement_results``) from eight threads, then the claims race of
  ``run.py`` (320 claims), then the workers' memory again: what serving
  copies out of the shared world (CPython writes reference counts into
  every object a request reads) plus each worker's own memo; and the
  same again after a provider is created while the workers run (each
  patches its world's indexes) and the workload is served again.
  ``server_mb`` adds the master's PSS to the workers': everything the
  server holds. ``recycled`` counts the workers replaced
  so far because their private memory passed ``[berth]
  worker_private_memory`` (``--private-memory``; 0 replaces none).

Compare two trees by running it with ``PYTHONPATH=<other tree>/src``.
Results are printed as JSON lines and a Markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

# bench/ for its sibling scripts, the repository root for support/.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import run  # noqa: E402
import worker_memory  # noqa: E402

from support.servers import Server  # noqa: E402

QUERY = "/allocation_candidates?%s&limit=1" % run.BASE


def _first_answer(url: str, since: float, timeout: float) -> float:
    """Seconds from ``since`` to a candidates answer from ``url``."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        try:
            resp = httpx.get(url + QUERY, headers=run.HEADERS, timeout=timeout)
            if resp.status_code == 200:
                return time.perf_counter() - since
        except httpx.HTTPError:
            pass
        time.sleep(0.01)
    raise RuntimeError("no answer within %.0f s" % timeout)


def _restart_workers(server: Server, timeout: float) -> float:
    """Kill every worker; seconds until a replacement answers."""
    old = set(worker_memory.worker_pids(server))
    began = time.perf_counter()
    for pid in old:
        os.kill(pid, signal.SIGKILL)
    while set(worker_memory.worker_pids(server)) & old:
        time.sleep(0.005)
    return _first_answer(server.url, began, timeout)


def _write(http: httpx.Client) -> None:
    """One new provider with inventory: a change after the master's load."""
    rp = str(uuid.uuid4())
    http.post("/resource_providers", json={"name": "startup-" + rp, "uuid": rp}).raise_for_status()
    http.put(
        "/resource_providers/%s/inventories" % rp,
        json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}},
    ).raise_for_status()


def _gap(http: httpx.Client, count: int) -> None:
    """``count`` writes (trait sets on one provider), each a change row."""
    rp = str(uuid.uuid4())
    http.post("/resource_providers", json={"name": "gap-" + rp, "uuid": rp}).raise_for_status()
    generation = 0
    for i in range(count):
        resp = http.put(
            "/resource_providers/%s/traits" % rp,
            json={
                "resource_provider_generation": generation,
                "traits": ["HW_CPU_X86_AVX2"] if i % 2 else [],
            },
        )
        resp.raise_for_status()
        generation = resp.json()["resource_provider_generation"]


def _workload(server: Server, count: int, timeout: float) -> None:
    """``count`` scheduler queries of each shape (``limit=1000``) from
    eight threads, then the claims race."""
    queries = ["/allocation_candidates?%s&limit=1000" % q for q in run.QUERIES.values()] * count

    def get(path: str) -> None:
        httpx.get(server.url + path, headers=run.HEADERS, timeout=timeout).raise_for_status()

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(get, queries))
    run.claims(server, argparse.Namespace(claims=320, clients=16, claims_seconds=120))


def _after_workload(server: Server, out: dict[str, Any], prefix: str) -> None:
    """The memory now: the largest worker RSS, the workers' PSS, and the
    whole server's (workers and master: what it holds in all), and how
    many workers were replaced for their memory so far."""
    assert server.proc is not None
    after = worker_memory.workers_memory(server)
    out[prefix + "rss_mb"] = after["rss_mb"]
    out[prefix + "pss_total_mb"] = after["pss_total_mb"]
    out[prefix + "server_mb"] = (
        after["pss_total_mb"] + worker_memory.memory(server.proc.pid)["pss_mb"]
    )
    log = (server.dir / "server.log").read_text(errors="replace")
    out[prefix + "recycled"] = log.count("private memory is over the limit")


def measure(
    url: str,
    workers: int,
    workdir: Path,
    timeout: float,
    gap: int,
    workload: int = 0,
    private_memory: int | None = None,
    rounds: int = 1,
) -> dict[str, Any]:
    options = {} if private_memory is None else {"worker_private_memory": private_memory}
    server = Server("berth", workdir / ("w%d" % workers), workers, url, berth_options=options)
    out: dict[str, Any] = {"workers": workers}
    try:
        out.update(worker_memory.start(server, timeout))
        assert server.proc is not None
        for done in range(1, rounds + 1 if workload else 1):
            # A longer run: the memory, and the workers replaced, after
            # each round.
            _workload(server, workload, timeout)
            _after_workload(server, out, "after_workload_")
            if rounds > 1:
                print(
                    json.dumps(
                        {
                            "workers": workers,
                            "round": done,
                            **{k: v for k, v in out.items() if k.startswith("after_workload_")},
                        }
                    ),
                    flush=True,
                )
        http = httpx.Client(base_url=server.url, headers=run.HEADERS, timeout=timeout)
        if workload:
            # A structural change the running workers see: each patches
            # its world's indexes (its own copy of the entries patched),
            # then serves the workload again.
            _write(http)
            _workload(server, workload, timeout)
            _after_workload(server, out, "after_change_workload_")
        out["master_pss_mb"] = worker_memory.memory(server.proc.pid)["pss_mb"]
        out["worker_start_s"] = _restart_workers(server, timeout)
        _write(http)
        out["worker_start_after_new_provider_s"] = _restart_workers(server, timeout)
        if gap:
            _gap(http, gap)
            out["worker_start_after_gap_s"] = _restart_workers(server, timeout)
    finally:
        server.stop()
    return out


def table(rows: list[dict[str, Any]]) -> str:
    keys = [
        "workers",
        "first_answer_s",
        "worker_start_s",
        "worker_start_after_new_provider_s",
        "worker_start_after_gap_s",
        "rss_mb",
        "shared_mb",
        "pss_total_mb",
        "master_pss_mb",
        "after_workload_rss_mb",
        "after_workload_pss_total_mb",
        "after_workload_server_mb",
        "after_workload_recycled",
        "after_change_workload_rss_mb",
        "after_change_workload_pss_total_mb",
        "after_change_workload_server_mb",
        "after_change_workload_recycled",
    ]
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for row in rows:
        cells = []
        for key in keys:
            value = row.get(key, "")
            cells.append("%.2f" % value if isinstance(value, float) else str(value))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True, help="a world built by bulk.py")
    ap.add_argument("--workers", type=int, nargs="+", default=[2, 8])
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--gap", type=int, default=0, help="writes before a second restart (0: none)")
    ap.add_argument(
        "--workload",
        type=int,
        default=0,
        help="scheduler queries of each shape, then claims, "
        "before measuring memory again (0: none)",
    )
    ap.add_argument(
        "--private-memory",
        type=int,
        help="[berth] worker_private_memory in MiB (0: workers "
        "are never replaced; default: Berth's own)",
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="run the first workload this many times, printing the memory after each",
    )
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="berth-startup-") as tmp:
        for workers in args.workers:
            row = measure(
                args.url,
                workers,
                Path(tmp),
                args.timeout,
                args.gap,
                args.workload,
                args.private_memory,
                args.rounds,
            )
            print(json.dumps(row), flush=True)
            rows.append(row)
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
