"""A write's allocation rows, however many: on PostgreSQL and SQLite up to
``ROWS_AT_ONCE`` go as one multi-row INSERT and more as an executemany
(``berth.db.connection``); every row lands with its provider, consumer,
class and amount, on every database.

Covers ``berth.domain.claim.insert``.
"""

from __future__ import annotations

import uuid as uuidlib

import pytest

from berth.db.connection import ROWS_AT_ONCE
from berth.db.engine import Database
from support.allocation_setup import PROJECT, USER, make_provider
from support.allocation_writes import check_usages
from support.statements import sent
from tests.conftest import Client


@pytest.mark.parametrize("consumers", [1, ROWS_AT_ONCE // 2, ROWS_AT_ONCE // 2 + 1])
def test_every_row_lands(client: Client, db: Database, consumers: int) -> None:
    """Each consumer holds two classes (two rows): ``consumers`` of them
    in one POST write 2, ``ROWS_AT_ONCE`` and ``ROWS_AT_ONCE + 2`` rows."""
    rp = make_provider(db, "rows", VCPU=1000, MEMORY_MB=100000)
    wanted = {str(uuidlib.uuid4()): {"VCPU": n + 1, "MEMORY_MB": 100 + n} for n in range(consumers)}
    with sent(db, lambda st: st.lstrip().startswith("INSERT INTO allocations")) as inserts:
        resp = client.post(
            "/allocations",
            json={
                c: {
                    "allocations": {rp: {"resources": amounts}},
                    "project_id": PROJECT,
                    "user_id": USER,
                    "consumer_generation": None,
                    "consumer_type": "INSTANCE",
                }
                for c, amounts in wanted.items()
            },
        )
    assert resp.status_code == 204, resp.text
    # One statement either way; on PostgreSQL and SQLite a multi-row one
    # up to ROWS_AT_ONCE rows, an executemany of one row's text beyond.
    [insert] = inserts
    rows = 2 * consumers
    if db.backend in ("postgresql", "sqlite"):
        at_once = rows if rows <= ROWS_AT_ONCE else 1
        assert insert.partition(" VALUES ")[2].count("), (") + 1 == at_once
    for consumer, amounts in wanted.items():
        got = client.get("/allocations/%s" % consumer).json()["allocations"]
        assert got == {rp: {"resources": amounts, "generation": got[rp]["generation"]}}
    check_usages(client, db, rp)
    usages = client.get("/resource_providers/%s/usages" % rp).json()["usages"]
    assert usages["VCPU"] == sum(a["VCPU"] for a in wanted.values())
