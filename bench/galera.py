"""What Berth's writes cost on a three-node Galera cluster.

Runs the racing write mix of ``support/galera_load.py`` (claims, guarded
updates, moves, multi-consumer claims, frees, reshapes, fights over
shared consumers) for a fixed time against Berth servers attached to one
node or to all three, with the candidate cache on or off, and prints per
run: acknowledged writes per second, answers by status, and the
transaction retries the servers made (1213 = deadlock or Galera
certification failure), per acknowledged write.

    .venv/bin/python -m bench.galera [--seconds 30] [--threads 12]

Starts the cluster (``support/galera.py``) if it is not running, and leaves
it as it found it.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # support/

from support import galera_load as load  # noqa: E402
from support.galera import Cluster  # noqa: E402

# The second form is what Berth logged before retries were counted (for
# runs of older code through PYTHONPATH).
RETRY_LINE = re.compile(
    r"retrying transaction (?:\(attempt \d+, code (\S+)\)"
    r"|after \((\d+),)"
)


def _retries(tmp: Path) -> dict[str, int]:
    counts: dict[str, int] = {}
    for log in tmp.glob("server*.log"):
        for match in RETRY_LINE.finditer(log.read_text(errors="replace")):
            code = match.group(1) or match.group(2)
            counts[code] = counts.get(code, 0) + 1
    return counts


def run(
    cluster: Cluster, nodes: int, cache: bool, seconds: float, threads: int, providers: int
) -> dict[str, Any]:
    """One measured run on a fresh database; returns its figures."""
    with load.fresh_database(cluster) as db_urls, tempfile.TemporaryDirectory() as tmpdir:
        tmp = Path(tmpdir)
        # Three servers in both cases, so only the nodes written differ.
        attached = [db_urls[n % nodes] for n in range(3)]
        with load.servers(attached, tmp, cache=cache, debug=True) as urls:
            rps = load.make_providers(urls[0], providers)
            ledger = load.Ledger()
            shared = load.seed_shared(urls[0], rps, ledger)
            # Only the load's own retries count.
            for log in tmp.glob("server*.log"):
                log.write_text("")
            seeded = ledger.writes
            start = time.monotonic()
            load.run_load(urls, rps, ledger, threads=threads, seconds=seconds, shared=shared)
            elapsed = time.monotonic() - start
        retries = _retries(tmp)
    writes = ledger.writes - seeded
    total_retries = sum(retries.values())
    return {
        "nodes": nodes,
        "cache": cache,
        "writes": writes,
        "per_s": writes / elapsed,
        "statuses": dict(sorted(ledger.statuses.items())),
        "retries": retries,
        "retry_per_write": total_retries / writes if writes else 0.0,
        "bad": len(ledger.bad),
    }


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=30)
    parser.add_argument("--threads", type=int, default=12)
    parser.add_argument(
        "--providers",
        type=int,
        default=4,
        help="providers written (few: most conflicts are on provider rows; many: few are)",
    )
    parser.add_argument(
        "--runs", default="1:on,3:on,1:off,3:off", help="nodes:cache pairs to run, comma-separated"
    )
    args = parser.parse_args(argv)
    cluster = Cluster()
    started = not cluster.running()
    cluster.start()
    try:
        print(
            "| nodes written | candidate cache | writes | writes/s | "
            "retries/write | retries by code | statuses |"
        )
        print("|---|---|---|---|---|---|---|")
        for spec in args.runs.split(","):
            nodes, cache = spec.split(":")
            r = run(cluster, int(nodes), cache == "on", args.seconds, args.threads, args.providers)
            print(
                "| %d | %s | %d | %.1f | %.3f | %s | %s |"
                % (
                    r["nodes"],
                    "on" if r["cache"] else "off",
                    r["writes"],
                    r["per_s"],
                    r["retry_per_write"],
                    r["retries"] or "-",
                    r["statuses"],
                ),
                flush=True,
            )
    finally:
        if started:
            cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
