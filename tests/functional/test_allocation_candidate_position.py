"""A candidates answer reads the change sequence's position once.

The API's middleware reads the position for the ``Berth-Position``
header; when it read it during the request (the first read after this
worker's write, or after ``POSITION_KEPT`` seconds), the candidate cache
takes that position instead of reading the same row again in its own
transaction. When the middleware answered from the position it keeps,
the cache reads the position itself, so a write made through another
worker is never hidden by the kept one.

Covers ``berth.api.app.ContextMiddleware._position`` and
``berth.domain.allocation_candidate.cache.CandidateCache.current``.
"""

from __future__ import annotations

import uuid as uuidlib
from contextlib import AbstractContextManager

import pytest

from berth.api import app as api_app
from berth.api.app import create_app
from berth.db.engine import Database
from support.numbered_providers import hosts, uuid
from support.statements import sent
from tests.conftest import Client, make_conf

QUERY = "/allocation_candidates?resources=VCPU:2"


def position_reads(db: Database) -> AbstractContextManager[list[str]]:
    """The reads of the change sequence's position sent inside the block."""
    return sent(db, lambda st: st.lstrip().upper().startswith("SELECT") and "berth_state" in st)


def claim(client: Client, host: int) -> None:
    """Take both VCPU of host ``host`` for a new consumer."""
    resp = client.put(
        "/allocations/%s" % uuidlib.uuid4(),
        json={
            "allocations": {uuid(host): {"resources": {"VCPU": 2}}},
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        },
    )
    assert resp.status_code == 204, resp.text


def roots(client: Client) -> set[str]:
    """The providers of the candidates for two VCPU, and checks that the
    answer says a position."""
    resp = client.get(QUERY)
    assert resp.status_code == 200, resp.text
    assert resp.headers["berth-position"]
    return {p for r in resp.json()["allocation_requests"] for p in r["allocations"]}


def test_after_a_write_the_answer_reads_the_position_once(db: Database) -> None:
    with Client(create_app(make_conf(), db)) as worker:
        hosts(worker, 3, 2)
        assert roots(worker) == {uuid(1), uuid(2), uuid(3)}
        claim(worker, 2)
        with position_reads(db) as reads:
            found = roots(worker)
        # The middleware's read; the cache took it (two reads before).
        assert len(reads) == 1
        assert found == {uuid(1), uuid(3)}


def test_a_kept_position_does_not_hide_another_workers_write(
    db: Database, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Worker A keeps the position it read; worker B claims; A's next
    answer, whose header says the kept position, still shows the claim:
    the cache read the position itself."""
    monkeypatch.setattr(api_app, "POSITION_KEPT", 3600.0)
    with (
        Client(create_app(make_conf(), db)) as a,
        Client(create_app(make_conf(), db)) as b,
    ):
        hosts(b, 3, 2)
        assert roots(a) == {uuid(1), uuid(2), uuid(3)}
        kept = a.get("/").headers["berth-position"]
        claim(b, 1)
        with position_reads(db) as reads:
            resp = a.get(QUERY)
        assert resp.headers["berth-position"] == kept  # the kept one
        assert {p for r in resp.json()["allocation_requests"] for p in r["allocations"]} == {
            uuid(2),
            uuid(3),
        }
        assert len(reads) == 1  # the cache's own
