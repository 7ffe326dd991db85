"""What validating a request costs: jsonschema alone against
``berth.api.schemas.FastValidator`` (fastjsonschema first, jsonschema for
the refusals), per body.

    .venv/bin/python bench/validation.py               # microseconds
    .venv/bin/python bench/validation.py --callgrind   # instructions

``jsonschema`` is the validator the handlers called before the fast path
(the one ``FastValidator`` keeps as its judge), ``fast`` the one they
call now, both on the same bodies: a claim (``PUT /allocations`` at 1.38,
as a scheduler sends it, mappings included), ``POST /allocations`` of two
consumers, ``PUT /resource_providers/{u}/inventories`` of three classes,
``PUT .../traits`` and the query of ``GET /allocation_candidates``.
Times are the best of five rounds (this machine is shared: they vary);
``--callgrind`` runs the rounds under valgrind and reports instructions
per validation, the same on every run.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from berth.api.schemas import (  # noqa: E402
    FastValidator,
    allocation,
    allocation_candidate,
    inventory,
    pick,
    trait,
)

HOST = "7c6b9f0e-3f7d-4c55-9a36-1d1f8a0e2b11"
OTHER = "0f0a4c4e-8f5e-4f7e-a6b1-6a2a4f0c9d33"


def _claim(host: str) -> dict[str, Any]:
    return {
        "allocations": {host: {"resources": {"VCPU": 1, "MEMORY_MB": 512, "DISK_GB": 10}}},
        "mappings": {"": [host]},
        "project_id": "p-bench",
        "user_id": "u-bench",
        "consumer_generation": None,
        "consumer_type": "INSTANCE",
    }


def _record(total: int) -> dict[str, Any]:
    return {
        "total": total,
        "reserved": 0,
        "min_unit": 1,
        "max_unit": total,
        "step_size": 1,
        "allocation_ratio": 1.0,
    }


#: name -> (validator, body)
CASES: dict[str, tuple[FastValidator, Any]] = {
    "claim": (pick(allocation.PUT_SCHEMAS, (1, 38)), _claim(HOST)),
    "post_allocations": (
        pick(allocation.POST_SCHEMAS, (1, 38)),
        {
            "3e4b4f6c-1b7a-4c1e-9a8e-2c1d3b4a5f60": _claim(HOST),
            "4f5c5a7d-2c8b-4d2f-8b9f-3d2e4c5b6a71": _claim(OTHER),
        },
    ),
    "put_inventories": (
        inventory.PUT_ALL_V,
        {
            "resource_provider_generation": 3,
            "inventories": {
                "VCPU": _record(32),
                "MEMORY_MB": _record(131072),
                "DISK_GB": _record(2048),
            },
        },
    ),
    "put_traits": (
        trait.SET_PROVIDER_TRAITS_V,
        {
            "resource_provider_generation": 3,
            "traits": ["HW_CPU_X86_AVX2", "COMPUTE_STATUS_DISABLED", "CUSTOM_GOLD"],
        },
    ),
    "candidates_query": (
        pick(allocation_candidate.SCHEMAS, (1, 39)),
        {"resources": "VCPU:1,MEMORY_MB:512,DISK_GB:10", "limit": "5"},
    ),
}


def _checks(name: str) -> dict[str, Callable[[], None]]:
    """The two ways of validating case ``name``'s body."""
    fast, body = CASES[name]
    judge = fast._judge
    # The fast check compiles on first use: not part of what is measured.
    fast.validate(body)
    return {"jsonschema": lambda: judge.validate(body), "fast": lambda: fast.validate(body)}


def times(rounds: int) -> None:
    print("%-18s %12s %10s %7s" % ("body", "jsonschema", "fast", "ratio"))
    for name in CASES:
        best = {}
        for way, check in _checks(name).items():
            spent = []
            for _ in range(5):
                start = time.perf_counter()
                for _ in range(rounds):
                    check()
                spent.append((time.perf_counter() - start) / rounds)
            best[way] = min(spent) * 1e6
        print(
            "%-18s %9.1f us %7.1f us %6.1fx"
            % (name, best["jsonschema"], best["fast"], best["jsonschema"] / best["fast"])
        )


def _measured(rounds: int) -> None:
    """Under valgrind: each case and way, collection switched on around
    its rounds only, then dumped under its name (``writes.Meter``)."""
    from writes import Meter

    meter = Meter()
    meter.on = True
    for name in CASES:
        for way, check in _checks(name).items():
            meter.start()
            for _ in range(rounds):
                check()
            meter.stop()
            meter.dump("%s %s" % (name, way))


def callgrind(rounds: int) -> None:
    folder = Path(tempfile.mkdtemp(prefix="berth-cg-validation-"))
    try:
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--collect-atstart=no",
                "--callgrind-out-file=%s/cg.%%p" % folder,
                sys.executable,
                __file__,
                "--rounds",
                str(rounds),
                "--inner",
            ],
            env={**os.environ, "PYTHONHASHSEED": "0"},
            check=True,
            stderr=subprocess.DEVNULL,
        )
        counts = {}
        for part in folder.iterdir():
            lines = part.read_text(errors="replace").splitlines()
            trigger = [line for line in lines[:20] if "Trigger: Client Request:" in line]
            total = [line for line in lines if line.startswith(("totals:", "summary:"))]
            if trigger and total:
                counts[trigger[0].split("Client Request:", 1)[1].strip()] = (
                    int(total[-1].split()[1]) / rounds
                )
    finally:
        shutil.rmtree(folder)
    print("%-18s %12s %10s %7s" % ("body", "jsonschema", "fast", "ratio"))
    for name in CASES:
        slow, fast = counts[name + " jsonschema"], counts[name + " fast"]
        print("%-18s %10.0f k %8.0f k %6.1fx" % (name, slow / 1e3, fast / 1e3, slow / fast))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--callgrind", action="store_true", help="instructions per validation (valgrind)"
    )
    ap.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="validations per round (default 500; 200 under valgrind)",
    )
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner:
        _measured(args.rounds)
    elif args.callgrind:
        callgrind(args.rounds or 200)
    else:
        times(args.rounds or 500)
    return 0


if __name__ == "__main__":
    sys.exit(main())
