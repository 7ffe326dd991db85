"""What racing writes acknowledged, and the checks of the nodes against it.

The ``Ledger`` keeps what each acknowledged write said (``galera_load``'s
clients record every answer in it), so that after the load every node
can be compared with it (``check_ledger``, ``twice_accepted``); a
``Monitor`` thread samples every node's SQL meanwhile for
over-allocation, and ``node_state`` reads a node's allocations once it
has applied the cluster's writes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import httpx
import sqlalchemy as sa

Allocs = dict[str, int]  # provider uuid -> VCPU


@dataclass
class Ledger:
    """Every answer received, and what the acknowledged writes left."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    #: consumer -> allocations, after its last acknowledged write.
    held: dict[str, Allocs] = field(default_factory=dict)
    #: consumers whose state is unknown (no answer, or a 5xx).
    unknown: set[str] = field(default_factory=set)
    #: (consumer, generation it was written at) of each accepted write.
    accepted: list[tuple[str, int | None]] = field(default_factory=list)
    #: shared consumer -> {generation sent: allocations written}.
    shared: dict[str, dict[int | None, Allocs]] = field(default_factory=dict)
    statuses: dict[int, int] = field(default_factory=dict)
    by_op: dict[str, int] = field(default_factory=dict)
    bad: list[str] = field(default_factory=list)
    writes: int = 0

    def record(
        self,
        op: str,
        resp: httpx.Response | None,
        writes: dict[str, tuple[int | None, Allocs]],
        *,
        tolerate_503: bool = False,
    ) -> bool:
        """Note one answer to a write of ``writes`` (consumer ->
        (generation sent, allocations)); True when it was accepted."""
        with self.lock:
            status = 0 if resp is None else resp.status_code
            self.statuses[status] = self.statuses.get(status, 0) + 1
            if status in (200, 204):
                self.writes += 1
                self.by_op[op] = self.by_op.get(op, 0) + 1
                for consumer, (gen, allocs) in writes.items():
                    self.accepted.append((consumer, gen))
                    if consumer in self.shared:
                        self.shared[consumer][gen] = allocs
                    if allocs:
                        self.held[consumer] = allocs
                    else:
                        self.held.pop(consumer, None)
                return True
            if status == 409 and _placement_error(resp):
                return False
            if status == 503 and tolerate_503 and _placement_error(resp):
                self.unknown.update(writes)
                return False
            self.unknown.update(writes)
            self.bad.append(
                "%s %s: %s" % (op, status, "no answer" if resp is None else resp.text[:300])
            )
            return False


def _placement_error(resp: httpx.Response | None) -> bool:
    if resp is None:
        return False
    try:
        error = resp.json()["errors"][0]
    except (ValueError, KeyError, IndexError, TypeError):
        return False
    return bool(
        error.get("code", "").startswith("placement.") and error.get("status") == resp.status_code
    )


OVER_ALLOCATED = sa.text("""
    SELECT i.resource_provider_id, i.resource_class_id, i.total, i.reserved,
           i.allocation_ratio, SUM(a.used)
    FROM inventories i JOIN allocations a
      ON a.resource_provider_id = i.resource_provider_id
     AND a.resource_class_id = i.resource_class_id
    GROUP BY i.resource_provider_id, i.resource_class_id, i.total,
             i.reserved, i.allocation_ratio
    HAVING SUM(a.used) > (i.total - i.reserved) * i.allocation_ratio""")


class Monitor(threading.Thread):
    """Samples every node for over-allocation until stopped."""

    def __init__(self, db_urls: list[str], interval: float = 0.25) -> None:
        super().__init__(daemon=True)
        self.engines = [
            sa.create_engine(
                u, pool_size=1, connect_args={"connect_timeout": 3, "read_timeout": 10}
            )
            for u in db_urls
        ]
        self.interval = interval
        self.samples = 0
        self.over: list[str] = []
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            for n, engine in enumerate(self.engines):
                try:
                    with engine.connect() as conn:
                        rows = conn.execute(OVER_ALLOCATED).all()
                except sa.exc.DBAPIError:
                    continue  # a node down (the node-kill test)
                self.samples += 1
                self.over.extend("node %d: %s" % (n + 1, tuple(row)) for row in rows)
            self._halt.wait(self.interval)

    def stop(self) -> None:
        self._halt.set()
        self.join(30)
        for engine in self.engines:
            engine.dispose()


def node_state(db_url: str) -> dict[str, Allocs]:
    """consumer -> {provider uuid: VCPU} as one node has it, once it has
    applied every write the cluster committed before the call."""
    engine = sa.create_engine(db_url)
    try:
        with engine.connect() as conn:
            conn.execute(sa.text("SET SESSION wsrep_sync_wait = 1"))
            rows = conn.execute(
                sa.text(
                    "SELECT a.consumer_id, rp.uuid, a.used FROM allocations a "
                    "JOIN resource_providers rp ON rp.id = a.resource_provider_id"
                )
            ).all()
    finally:
        engine.dispose()
    state: dict[str, Allocs] = {}
    for consumer, rp, used in rows:
        state.setdefault(consumer, {})[rp] = int(used)
    return state


def check_ledger(ledger: Ledger, state: dict[str, Allocs]) -> list[str]:
    """What a node's allocations contradict in the ledger."""
    problems = []
    for consumer, allocs in ledger.held.items():
        if consumer in ledger.unknown or consumer in ledger.shared:
            continue
        if state.get(consumer) != allocs:
            problems.append(
                "consumer %s: acknowledged %s, node has %s"
                % (consumer, allocs, state.get(consumer))
            )
    for consumer, got in state.items():
        if (
            consumer not in ledger.held
            and consumer not in ledger.unknown
            and consumer not in ledger.shared
        ):
            problems.append(
                "consumer %s holds %s that no acknowledged write left" % (consumer, got)
            )
    for consumer, by_gen in ledger.shared.items():
        # Accepted writes of a shared consumer form one chain of
        # generations: the last one is the newest generation.
        last = max(by_gen, key=lambda g: -1 if g is None else g)
        if consumer not in ledger.unknown and state.get(consumer) != by_gen[last]:
            problems.append(
                "shared consumer %s: last acknowledged %s, node "
                "has %s" % (consumer, by_gen[last], state.get(consumer))
            )
    return problems


def twice_accepted(ledger: Ledger) -> list[tuple[str, int | None]]:
    """(consumer, generation) pairs accepted more than once."""
    seen: set[tuple[str, int | None]] = set()
    twice = []
    for pair in ledger.accepted:
        if pair in seen:
            twice.append(pair)
        seen.add(pair)
    return twice
