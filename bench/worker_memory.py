"""The workers of a running server: their memory, from ``/proc``, and
how soon a fresh server answers (``scale.py`` and ``startup.py``)."""

from __future__ import annotations

import os
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import run

from support.servers import Server

Result = dict[str, Any]


def worker_pids(server: Server) -> list[int]:
    """The server's worker processes: every process in its group but the
    master."""
    assert server.proc is not None
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == server.proc.pid:
            continue
        try:
            stat = Path("/proc/%s/stat" % entry).read_text()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[2]) == server.proc.pid:
            pids.append(int(entry))
    return pids


def memory(pid: int) -> dict[str, float]:
    """RSS, the part of it shared with other processes, and PSS, in MB."""
    fields: dict[str, float] = {}
    for line in Path("/proc/%d/smaps_rollup" % pid).read_text().splitlines()[1:]:
        key, _, rest = line.partition(":")
        fields[key] = int(rest.split()[0]) / 1024
    return {
        "rss_mb": fields["Rss"],
        "pss_mb": fields["Pss"],
        "shared_mb": fields["Shared_Clean"] + fields["Shared_Dirty"],
    }


def start(server: Server, timeout: float) -> Result:
    """Start ``server``; seconds to its first candidates answer, then
    memory per worker once every worker has answered (or timed out)."""
    began = time.perf_counter()
    server.start()
    http = httpx.Client(base_url=server.url, headers=run.HEADERS, timeout=timeout)
    query = "/allocation_candidates?%s&limit=1" % run.BASE
    try:
        http.get(query).raise_for_status()
    except httpx.HTTPError as exc:
        return {"error": str(exc)[:100]}
    first = time.perf_counter() - began
    # Every worker answers at least once: each has its world loaded.
    workers = server.workers
    with ThreadPoolExecutor(workers * 2) as pool:
        list(
            pool.map(
                lambda _: httpx.get(server.url + query, headers=run.HEADERS, timeout=timeout),
                range(workers * 8),
            )
        )
    return {"first_answer_s": first, **workers_memory(server)}


def workers_memory(server: Server) -> Result:
    """The workers' memory now: largest RSS, smallest shared part, and
    the sum of their PSS (their true total)."""
    # A worker may be on its way out (replaced for its memory, [berth]
    # worker_private_memory): read the ones there, once all are.
    for _ in range(100):
        mems = []
        for pid in worker_pids(server):
            try:
                mems.append(memory(pid))
            except OSError:
                continue
        if len(mems) >= server.workers:
            break
        time.sleep(0.1)
    return {
        "workers": len(mems),
        "rss_mb": max(m["rss_mb"] for m in mems),
        "shared_mb": min(m["shared_mb"] for m in mems),
        "pss_total_mb": sum(m["pss_mb"] for m in mems),
    }
