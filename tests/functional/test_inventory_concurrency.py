"""Many processes updating one provider's inventory with generations.

Every write either lands or is refused with ConcurrentUpdate; the final
generation counts exactly the writes that landed.

Covers ``berth.domain.inventory`` (generation checks) across processes.
"""

from __future__ import annotations

import multiprocessing

import pytest

from berth.db.engine import Database, create_engine
from berth.domain import errors, inventory, inventory_read
from berth.domain.capacity import Inventory
from support.provider_rows import generation, make_provider

WORKERS = 6
ATTEMPTS = 15


def _worker(url: str, uuid: str, seed: int) -> tuple[int, int]:
    """Read the generation, then write with it; return (landed, refused)."""
    db = Database(create_engine(url))
    landed = refused = 0
    try:
        for attempt in range(ATTEMPTS):
            listing = db.read(lambda conn: inventory_read.list_inventories(conn, uuid))
            inv = Inventory(total=100 + seed * ATTEMPTS + attempt)
            try:
                db.run(
                    lambda conn, inv=inv, gen=listing.generation: inventory.update_inventory(
                        conn, uuid, "VCPU", inv, gen, reserved_can_be_total=True
                    )
                )
                landed += 1
            except errors.ConcurrentUpdate:
                refused += 1
    finally:
        db.dispose()
    return landed, refused


@pytest.mark.stress
def test_concurrent_inventory_updates(db: Database, db_url: str) -> None:
    rp_id, uuid = make_provider(db)
    db.run(lambda conn: inventory.set_inventories(conn, rp_id, {"VCPU": Inventory(total=1)}))
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(WORKERS) as pool:
        results = pool.starmap(_worker, [(db_url, uuid, n) for n in range(WORKERS)])
    landed = sum(r[0] for r in results)
    refused = sum(r[1] for r in results)
    assert landed + refused == WORKERS * ATTEMPTS
    assert landed >= 1
    assert generation(db, rp_id) == landed
