"""The per-worker candidate cache re-reads only what a write changed,
and what it re-reads is never stale: a claim or a delete re-reads the
usage of the providers it touched, an inventory change that provider, a
deleted trait the whole world; a move frees the provider it left; races
that only READ COMMITTED allows (a consumer created meanwhile, a trait
created during a refresh) leave every cache true; a usage refresh copies
the provider map unless the cache is exclusive.
"""

from __future__ import annotations

import uuid as uuidlib
from typing import Any

import pytest

from berth.api.app import create_app
from berth.db.engine import Database
from berth.domain import claim
from berth.domain.allocation_candidate import load
from support.numbered_providers import hosts, uuid
from tests.conftest import Client, make_conf


def test_each_change_reads_only_what_it_must(db: Database, monkeypatch: Any) -> None:
    """A claim or a delete re-reads the usage of the providers it touched;
    an inventory change re-reads that provider; deleting a trait (which
    no cached world can tie to providers) reloads the world."""
    calls: list[str] = []
    for name in ("load_world", "refresh_providers", "refresh_usage"):
        real = getattr(load, name)
        monkeypatch.setattr(
            load, name, lambda *a, _n=name, _f=real, **k: calls.append(_n) or _f(*a, **k)
        )
    with Client(create_app(make_conf(), db)) as client:
        hosts(client, 8, 2)
        query = "/allocation_candidates?resources=VCPU:2"
        assert len(client.get(query).json()["allocation_requests"]) == 8
        assert calls == ["load_world"]
        consumer = str(uuidlib.uuid4())
        assert (
            client.put(
                "/allocations/%s" % consumer,
                json={
                    "allocations": {uuid(1): {"resources": {"VCPU": 1}}},
                    "project_id": "p",
                    "user_id": "u",
                    "consumer_generation": None,
                    "consumer_type": "INSTANCE",
                },
            ).status_code
            == 204
        )
        assert len(client.get(query).json()["allocation_requests"]) == 7
        assert client.delete("/allocations/%s" % consumer).status_code == 204
        assert len(client.get(query).json()["allocation_requests"]) == 8
        assert calls == ["load_world", "refresh_usage", "refresh_usage"]
        gen = client.get("/resource_providers/%s" % uuid(1)).json()["generation"]
        assert (
            client.put(
                "/resource_providers/%s/inventories" % uuid(1),
                json={"resource_provider_generation": gen, "inventories": {"VCPU": {"total": 1}}},
            ).status_code
            == 200
        )
        assert len(client.get(query).json()["allocation_requests"]) == 7
        assert calls[-1] == "refresh_providers"
        assert client.put("/traits/CUSTOM_X").status_code == 201
        assert client.delete("/traits/CUSTOM_X").status_code == 204
        assert len(client.get(query).json()["allocation_requests"]) == 7
        assert calls[-1] == "load_world"
        assert calls.count("load_world") == 2


@pytest.mark.parametrize("how", ["put", "post"])
def test_moved_consumer_frees_the_provider_it_left(db: Database, how: str) -> None:
    """A move changes the usage of the provider left behind, which the
    claim does not lock: another worker must still see it freed."""
    with (
        Client(create_app(make_conf(), db)) as writer,
        Client(create_app(make_conf(), Database(db.engine))) as reader,
    ):
        hosts(writer, 2, 1)
        consumer = str(uuidlib.uuid4())
        body = {"project_id": "p", "user_id": "u", "consumer_type": "INSTANCE"}
        assert (
            writer.put(
                "/allocations/%s" % consumer,
                json={
                    **body,
                    "consumer_generation": None,
                    "allocations": {uuid(1): {"resources": {"VCPU": 1}}},
                },
            ).status_code
            == 204
        )
        query = "/allocation_candidates?resources=VCPU:1"
        assert reader.get(query).json()["allocation_requests"] == [
            {"allocations": {uuid(2): {"resources": {"VCPU": 1}}}, "mappings": {"": [uuid(2)]}}
        ]
        move = {
            **body,
            "consumer_generation": 1,
            "allocations": {uuid(2): {"resources": {"VCPU": 1}}},
        }
        resp = (
            writer.put("/allocations/%s" % consumer, json=move)
            if how == "put"
            else writer.post("/allocations", json={consumer: move})
        )
        assert resp.status_code == 204, resp.text
        assert reader.get(query).json()["allocation_requests"] == [
            {"allocations": {uuid(1): {"resources": {"VCPU": 1}}}, "mappings": {"": [uuid(1)]}}
        ]


def test_deleted_trait_is_unknown_again(db: Database) -> None:
    with Client(create_app(make_conf(), db)) as client:
        assert client.put("/traits/CUSTOM_GONE").status_code == 201
        query = "/allocation_candidates?resources=VCPU:1&required=CUSTOM_GONE"
        assert client.get(query).status_code == 200
        assert client.delete("/traits/CUSTOM_GONE").status_code == 204
        resp = client.get(query)
        assert resp.status_code == 400
        assert "No such trait(s): CUSTOM_GONE" in resp.text


# SQLite writers run one at a time and a reader sees one snapshot, and a
# write forced inside another transaction would wait for its lock.


def _read_committed_only(backend: str) -> None:
    if backend == "sqlite":
        pytest.skip("needs READ COMMITTED interleaving (PostgreSQL, MariaDB)")


def test_emptying_a_consumer_created_meanwhile_keeps_its_claim(
    db: Database, backend: str, monkeypatch: Any
) -> None:
    """Emptying consumer X, not found when read, must not remove the
    allocations a concurrent request gives X before the delete runs: that
    request committed first, and its claim stands (and every cache keeps
    showing it)."""
    _read_committed_only(backend)
    body = {"project_id": "p", "user_id": "u", "consumer_type": "INSTANCE"}
    with (
        Client(create_app(make_conf(), db)) as writer,
        Client(create_app(make_conf(), Database(db.engine))) as reader,
    ):
        rp = uuid(1)
        hosts(writer, 1, 1)
        # The project and user rows exist first, so that neither request
        # below inserts them (the second would wait on the first's row).
        other = str(uuidlib.uuid4())
        assert (
            writer.put(
                "/allocations/%s" % other,
                json={
                    **body,
                    "consumer_generation": None,
                    "allocations": {rp: {"resources": {"VCPU": 1}}},
                },
            ).status_code
            == 204
        )
        assert writer.delete("/allocations/%s" % other).status_code == 204
        query = "/allocation_candidates?resources=VCPU:1"
        assert len(reader.get(query).json()["allocation_requests"]) == 1
        consumer = str(uuidlib.uuid4())
        real = claim.lock_providers

        def racing(conn: Any, ids: set[int]) -> None:
            monkeypatch.setattr(claim, "lock_providers", real)
            resp = writer.put(
                "/allocations/%s" % consumer,
                json={
                    **body,
                    "consumer_generation": None,
                    "allocations": {rp: {"resources": {"VCPU": 1}}},
                },
            )
            assert resp.status_code == 204, resp.text
            real(conn, ids)

        monkeypatch.setattr(claim, "lock_providers", racing)
        resp = writer.post(
            "/allocations",
            json={consumer: {**body, "consumer_generation": None, "allocations": {}}},
        )
        assert resp.status_code == 204, resp.text
        held = writer.get("/allocations/%s" % consumer).json()
        assert held["allocations"] == {rp: {"resources": {"VCPU": 1}, "generation": 3}}
        assert reader.get(query).json()["allocation_requests"] == []


def test_trait_created_during_a_refresh(db: Database, backend: str, monkeypatch: Any) -> None:
    """A trait created and set on a provider while a worker re-reads its
    world is picked up, not an unknown id (which was a 500)."""
    _read_committed_only(backend)
    with (
        Client(create_app(make_conf(), db)) as writer,
        Client(create_app(make_conf(), Database(db.engine))) as reader,
    ):
        hosts(writer, 2, 4)
        query = "/allocation_candidates?resources=VCPU:1"
        assert reader.get(query).status_code == 200
        writer.put(
            "/resource_providers/%s/traits" % uuid(1),
            json={"resource_provider_generation": 1, "traits": ["HW_CPU_X86_AVX2"]},
        )
        real = load._providers

        def racing(*args: Any) -> Any:
            # Between reading the names and reading the providers.
            monkeypatch.setattr(load, "_providers", real)
            assert writer.put("/traits/CUSTOM_NEW").status_code == 201
            assert (
                writer.put(
                    "/resource_providers/%s/traits" % uuid(2),
                    json={"resource_provider_generation": 1, "traits": ["CUSTOM_NEW"]},
                ).status_code
                == 200
            )
            return real(*args)

        # (Two providers, one changed: the world is read whole.)
        monkeypatch.setattr(load, "_providers", racing)
        resp = reader.get(query + "&required=HW_CPU_X86_AVX2")
        assert resp.status_code == 200, resp.text
        assert resp.json()["allocation_requests"][0]["allocations"] == {
            uuid(1): {"resources": {"VCPU": 1}}
        }


@pytest.mark.parametrize("exclusive", [False, True])
def test_a_usage_refresh_copies_the_provider_map_unless_exclusive(
    db: Database, exclusive: bool
) -> None:
    """A claim makes the next request refresh usage. A cache that others
    may read copies the provider map and leaves the old cached world as it
    was; an exclusive one updates the map in place (no copy: in a forked
    worker, a copy writes to every provider object's page)."""
    app = create_app(make_conf(), db)
    app.state.candidate_cache.exclusive = exclusive
    with Client(app) as client:
        hosts(client, 4, 2)
        query = "/allocation_candidates?resources=VCPU:2"
        assert len(client.get(query).json()["allocation_requests"]) == 4
        before = app.state.candidate_cache.latest
        old = before.world.providers
        claimed = before.world.by_uuid[uuid(1)]
        was = old[claimed]
        assert (
            client.put(
                "/allocations/%s" % uuidlib.uuid4(),
                json={
                    "allocations": {uuid(1): {"resources": {"VCPU": 2}}},
                    "project_id": "p",
                    "user_id": "u",
                    "consumer_generation": None,
                    "consumer_type": "INSTANCE",
                },
            ).status_code
            == 204
        )
        assert len(client.get(query).json()["allocation_requests"]) == 3
        after = app.state.candidate_cache.latest
        assert after is not before
        assert after.world.providers[claimed].used == {"VCPU": 2}
        assert (after.world.providers is old) == exclusive
        # The old cached world kept its own provider object, or shares the
        # updated map.
        assert (before.world.providers[claimed] is was) != exclusive
