"""A structural write is followed by patching the world, never by
building it anew, in a worker other than the one that wrote.

Two applications share the database as two workers of one server do: a
writer, and a follower whose candidate cache is exclusive (refreshed in
place, as a ``berth serve`` worker's). The world is the bench's
``devices`` shape (hosts with NUMA cells, PFs, vGPUs, bandwidth and PCI
devices, and sharing disk pools). After each kind of structural write
through the writer, the follower's next request must refresh by
re-reading the providers the write touched, build no world
(``World.__init__`` is counted: a rebuild calls it once), hold a world
equal index by index to one built anew, and answer as a fresh worker
does.
"""

from __future__ import annotations

import sys
import uuid as uuidlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from berth.api.app import create_app
from berth.db.engine import Database
from berth.domain.allocation_candidate import world as world_module
from berth.domain.allocation_candidate.cache import Refresh
from support.candidate_worlds import assert_same
from tests.conftest import Client, make_conf

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
import bulk  # noqa: E402
import world as world_mod  # noqa: E402

HOSTS = 12
QUERY = "/allocation_candidates?%s&limit=50" % world_mod.DEVICE_REQUEST
MICROVERSION = {"openstack-api-version": "placement 1.39"}


def _uuid(name: str) -> str:
    return world_mod.uid(name)


def _put_labels(
    client: httpx.Client, rp: str, part: str, change: Callable[[list[str]], list[str]]
) -> None:
    have = client.get("/resource_providers/%s/%s" % (rp, part)).json()
    body = {
        "resource_provider_generation": have["resource_provider_generation"],
        part: change(have[part]),
    }
    r = client.put("/resource_providers/%s/%s" % (rp, part), json=body)
    assert r.status_code == 200, r.text


def _new_root(client: httpx.Client, name: str, disk: int) -> str:
    """A new root provider holding ``disk`` DISK_GB; its uuid."""
    rp = str(uuidlib.uuid4())
    assert client.post("/resource_providers", json={"name": name, "uuid": rp}).status_code == 200
    r = client.put(
        "/resource_providers/%s/inventories" % rp,
        json={"resource_provider_generation": 0, "inventories": {"DISK_GB": {"total": disk}}},
    )
    assert r.status_code == 200, r.text
    return rp


def new_tree(client: httpx.Client) -> None:
    _new_root(client, "new-host", 100)


def new_child(client: httpx.Client) -> None:
    body = {"name": "new-gpu", "parent_provider_uuid": _uuid("cn-00003")}
    assert client.post("/resource_providers", json=body).status_code == 200


def deleted_child(client: httpx.Client) -> None:
    assert client.delete("/resource_providers/%s" % _uuid("cn-00004-pci2")).status_code == 204


def inventory_class_added(client: httpx.Client) -> None:
    rp = _uuid("cn-00005-gpu1")
    have = client.get("/resource_providers/%s/inventories" % rp).json()
    body = {
        "resource_provider_generation": have["resource_provider_generation"],
        "inventories": {**have["inventories"], world_mod.PCI_CLASS: {"total": 2}},
    }
    r = client.put("/resource_providers/%s/inventories" % rp, json=body)
    assert r.status_code == 200, r.text


def numa_traits(client: httpx.Client) -> None:
    _put_labels(client, _uuid("cn-00006-numa1"), "traits", lambda have: have + ["CUSTOM_FAST"])


def host_aggregate(client: httpx.Client) -> None:
    _put_labels(
        client, _uuid("cn-00007"), "aggregates", lambda have: have + [world_mod.uid("share-2")]
    )


def pool_traits(client: httpx.Client) -> None:
    _put_labels(client, _uuid("pool-0"), "traits", lambda have: have + ["CUSTOM_FAST"])


def pool_aggregates(client: httpx.Client) -> None:
    _put_labels(client, _uuid("pool-1"), "aggregates", lambda have: have + [world_mod.uid("agg-3")])


def pool_stops_sharing(client: httpx.Client) -> None:
    _put_labels(
        client,
        _uuid("pool-0"),
        "traits",
        lambda have: [t for t in have if t != "MISC_SHARES_VIA_AGGREGATE"],
    )


def pool_deleted(client: httpx.Client) -> None:
    assert client.delete("/resource_providers/%s" % _uuid("pool-1")).status_code == 204


def new_pool(client: httpx.Client) -> None:
    rp = _new_root(client, "new-pool", 5000)
    _put_labels(client, rp, "traits", lambda have: ["MISC_SHARES_VIA_AGGREGATE"])
    _put_labels(client, rp, "aggregates", lambda have: [world_mod.uid("agg-1")])


WRITES = [
    new_tree,
    new_child,
    deleted_child,
    inventory_class_added,
    numa_traits,
    host_aggregate,
    pool_traits,
    pool_aggregates,
    pool_stops_sharing,
    pool_deleted,
    new_pool,
]


def _roots(answer: dict[str, Any]) -> list[list[str]]:
    return [sorted(req["allocations"]) for req in answer["allocation_requests"]]


@pytest.mark.parametrize("write", WRITES, ids=lambda w: w.__name__)
def test_a_structural_write_is_patched_into_another_worker(
    db: Database, monkeypatch: Any, write: Callable[[httpx.Client], None]
) -> None:
    db.run(lambda conn: bulk.write(conn, world_mod.plan(HOSTS, allocations=30, shape="devices")))
    built: list[int] = []
    real = world_module.World.__init__

    def counting(world: Any, providers: Any) -> None:
        built.append(1)
        real(world, providers)

    monkeypatch.setattr(world_module.World, "__init__", counting)
    refreshes: list[Refresh] = []
    follower_app = create_app(make_conf(), db, world_observers=[refreshes.append])
    follower_app.state.candidate_cache.exclusive = True
    with Client(create_app(make_conf(), db)) as writer, Client(follower_app) as follower:
        writer.headers.update(MICROVERSION)
        follower.headers.update(MICROVERSION)
        first = follower.get(QUERY)
        assert first.status_code == 200, first.text
        # Hosts first: every host (tree) that fits is among the first.
        assert len(first.json()["allocation_requests"]) == 50
        assert built == [1]
        refreshes.clear()
        write(writer)
        after = follower.get(QUERY)
        assert after.status_code == 200, after.text
        assert [r.kind for r in refreshes] == ["providers"]
        assert built == [1], "the follower built its world anew"
        kept = follower_app.state.candidate_cache.latest
        assert kept is not None
        assert_same(kept.world, real_world(kept.world, real), memos=False)
    # A fresh worker (a whole load) answers the same.
    with Client(create_app(make_conf(), db)) as fresh:
        fresh.headers.update(MICROVERSION)
        assert _roots(fresh.get(QUERY).json()) == _roots(after.json())


def real_world(world: world_module.World, init: Any) -> world_module.World:
    """A world built anew of ``world``'s providers (with the real
    ``__init__``, uncounted)."""
    out = object.__new__(world_module.World)
    init(out, world.providers.values())
    return out
