"""Writes that change nothing, matched to upstream's object layer.

Upstream skips the provider generation bump only when a traits PUT (or
the traits DELETE) leaves the set as it was. Aggregate PUTs (1.19 on) and
inventory PUTs bump it whether or not anything changed; these tests pin
both halves so that a client caching the generation sees exactly what it
would see from upstream.

Covers the generation bumps of ``berth.domain.trait``,
``berth.domain.aggregate`` and ``berth.domain.inventory``.
"""

from __future__ import annotations

from typing import Any

from berth.db.engine import Database
from support.provider_rows import generation, make_provider


def test_trait_put_with_the_same_traits_keeps_the_generation(db: Database, client: Any) -> None:
    rp_id, uuid = make_provider(db)
    client.put("/traits/CUSTOM_A")
    client.put("/traits/CUSTOM_B")
    url = "/resource_providers/%s/traits" % uuid
    first = client.put(
        url, json={"traits": ["CUSTOM_A", "CUSTOM_B"], "resource_provider_generation": 0}
    )
    assert first.json()["resource_provider_generation"] == 1
    # Same set, other order, a duplicate: nothing changes.
    again = client.put(
        url,
        json={"traits": ["CUSTOM_B", "CUSTOM_A", "CUSTOM_A"], "resource_provider_generation": 1},
    )
    assert again.status_code == 200
    assert again.json() == {"traits": ["CUSTOM_A", "CUSTOM_B"], "resource_provider_generation": 1}
    assert generation(db, rp_id) == 1
    # The generation is still checked even when nothing would change.
    stale = client.put(
        url, json={"traits": ["CUSTOM_A", "CUSTOM_B"], "resource_provider_generation": 0}
    )
    assert stale.status_code == 409
    # A real change still bumps it.
    changed = client.put(url, json={"traits": ["CUSTOM_A"], "resource_provider_generation": 1})
    assert changed.json()["resource_provider_generation"] == 2


def test_trait_delete_on_a_provider_without_traits_keeps_the_generation(
    db: Database, client: Any
) -> None:
    rp_id, uuid = make_provider(db, generation=3)
    url = "/resource_providers/%s/traits" % uuid
    assert client.delete(url).status_code == 204
    assert generation(db, rp_id) == 3
    client.put("/traits/CUSTOM_A")
    client.put(url, json={"traits": ["CUSTOM_A"], "resource_provider_generation": 3})
    assert client.delete(url).status_code == 204
    assert generation(db, rp_id) == 5


def test_aggregate_put_unchanged_bumps_the_generation_as_upstream(
    db: Database, client: Any
) -> None:
    rp_id, uuid = make_provider(db)
    url = "/resource_providers/%s/aggregates" % uuid
    agg = "11111111-2222-3333-4444-555555555555"
    api = client.at("1.19")
    first = api.put(url, json={"aggregates": [agg], "resource_provider_generation": 0})
    assert first.json()["resource_provider_generation"] == 1
    same = api.put(url, json={"aggregates": [agg], "resource_provider_generation": 1})
    assert same.status_code == 200
    assert same.json()["resource_provider_generation"] == 2
    assert generation(db, rp_id) == 2


def test_inventory_put_unchanged_bumps_the_generation_as_upstream(
    db: Database, client: Any
) -> None:
    rp_id, uuid = make_provider(db)
    url = "/resource_providers/%s/inventories" % uuid
    body: dict[str, Any] = {
        "inventories": {"VCPU": {"total": 8}},
        "resource_provider_generation": 0,
    }
    assert client.put(url, json=body).json()["resource_provider_generation"] == 1
    body["resource_provider_generation"] = 1
    assert client.put(url, json=body).json()["resource_provider_generation"] == 2
    one = client.put(url + "/VCPU", json={"total": 8, "resource_provider_generation": 2})
    assert one.json()["resource_provider_generation"] == 3
    assert generation(db, rp_id) == 3
