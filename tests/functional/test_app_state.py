"""The candidate cache belongs to the application state built by
``create_app``: one per application, none shared through the module."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from berth.api import util
from berth.api.app import State, create_app
from berth.db.engine import Database
from berth.domain.allocation_candidate import load
from berth.domain.allocation_candidate.cache import Refresh
from tests.conftest import Client, make_conf

QUERY = "/allocation_candidates?resources=VCPU:1"


def _host(client: Client, name: str, uuid: str) -> None:
    assert client.post("/resource_providers", json={"name": name, "uuid": uuid}).status_code == 200
    assert (
        client.put(
            "/resource_providers/%s/inventories" % uuid,
            json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}},
        ).status_code
        == 200
    )


def _count_loads(monkeypatch: Any) -> list[str]:
    calls: list[str] = []
    real = load.load_world
    monkeypatch.setattr(load, "load_world", lambda conn: calls.append("load") or real(conn))
    return calls


def test_each_app_owns_its_cache(db: Database, monkeypatch: Any) -> None:
    """Two apps over the very same Database object keep two caches (a
    module-level registry keyed by the database would share one), and
    the cache the handlers use is the state's."""
    heard: list[Refresh] = []
    first = create_app(make_conf(), db, world_observers=[heard.append])
    second = create_app(make_conf(), db)
    calls = _count_loads(monkeypatch)
    with Client(first) as one, Client(second) as two:
        _host(one, "h1", "00000000-0000-4000-8000-000000000001")
        assert len(one.get(QUERY).json()["allocation_requests"]) == 1
        assert len(one.get(QUERY).json()["allocation_requests"]) == 1
        assert calls == ["load"]
        assert len(two.get(QUERY).json()["allocation_requests"]) == 1
        assert calls == ["load", "load"]
    assert [(h.kind, h.kept) for h in heard] == [("whole", True)]
    assert len(heard[0].cached.world.providers) == 1


def test_candidate_cache_helper_returns_the_state_cache(db: Database) -> None:
    state = State(make_conf(), db)
    req = SimpleNamespace(context=SimpleNamespace(state=state))
    assert util.candidate_cache(req) is state.candidate_cache  # type: ignore[arg-type]
    assert util.candidate_cache(req) is util.candidate_cache(req)  # type: ignore[arg-type]
    assert state.candidate_cache.keep
    off = State(make_conf(berth__candidate_cache=False), db)
    assert not off.candidate_cache.keep


def test_cache_off_builds_a_world_per_request(db: Database, monkeypatch: Any) -> None:
    heard: list[Refresh] = []
    app = create_app(make_conf(berth__candidate_cache=False), db, world_observers=[heard.append])
    calls = _count_loads(monkeypatch)
    with Client(app) as client:
        _host(client, "h1", "00000000-0000-4000-8000-000000000001")
        for _ in range(3):
            assert len(client.get(QUERY).json()["allocation_requests"]) == 1
    assert calls == ["load"] * 3
    assert [(h.kind, h.kept) for h in heard] == [("whole", False)] * 3
