"""How the report client judges change-feed events against its cache
(``berth.client.feed.judge``): what it applies in place, which trees it
reads again, and what it leaves alone."""

from __future__ import annotations

from typing import Any

import pytest

from berth.client import ProviderTree
from berth.client.feed import _earliest, judge
from tests.unit.conftest import AGG, CELL, CN, OTHER, POOL

SHARING = {CN: [POOL]}


def ev(kind: str, subject: str, new: Any = None, old: Any = None) -> dict[str, Any]:
    return {"kind": kind, "subject": subject, "new": new, "old": old}


def test_traits_and_inventories_are_applied_in_place(feed_cache: ProviderTree) -> None:
    judged = judge(
        [
            ev(
                "traits.set",
                CELL,
                {"generation": 4, "traits": ["HW_NUMA_ROOT"]},
                {"generation": 3, "traits": []},
            ),
            ev(
                "inventories.set",
                CN,
                {
                    "generation": 5,
                    "inventories": {
                        "VCPU": {
                            "total": 8,
                            "reserved": 0,
                            "min_unit": 1,
                            "max_unit": 8,
                            "step_size": 1,
                            "allocation_ratio": 16.0,
                        }
                    },
                },
                None,
            ),
        ],
        feed_cache,
        SHARING,
    )
    assert (judged.stale, judged.everything, judged.applied) == (set(), False, 2)
    assert feed_cache.data(CELL).traits == {"HW_NUMA_ROOT"}
    assert feed_cache.data(CELL).generation == 4
    assert feed_cache.data(CN).inventory["VCPU"]["total"] == 8


def test_an_event_older_than_the_cache_is_skipped(feed_cache: ProviderTree) -> None:
    judge([ev("traits.set", CELL, {"generation": 1, "traits": ["OLD"]})], feed_cache, SHARING)
    assert feed_cache.data(CELL).traits == frozenset()
    assert feed_cache.data(CELL).generation == 2


def test_structure_and_aggregate_changes_mark_the_tree(feed_cache: ProviderTree) -> None:
    cases = [
        ev("aggregates.set", CELL, {"generation": 3, "aggregates": ["x"]}),
        ev(
            "provider.created",
            "new-uuid",
            {"name": "n", "generation": 0, "parent_provider_uuid": CELL, "root_provider_uuid": CN},
        ),
        ev(
            "provider.updated",
            CELL,
            {
                "name": "renamed",
                "generation": 2,
                "parent_provider_uuid": CN,
                "root_provider_uuid": CN,
            },
        ),
        ev(
            "provider.updated",
            OTHER,
            {  # moved into our tree
                "name": "o",
                "generation": 0,
                "parent_provider_uuid": CELL,
                "root_provider_uuid": CN,
            },
        ),
        ev("provider.deleted", CELL, None, {"name": "cell"}),
        ev("provider.deleted", POOL, None, {"name": "pool"}),
        # another host's provider joins our aggregate (it may share)
        ev(
            "aggregates.set",
            OTHER,
            {"generation": 1, "aggregates": [AGG]},
            {"generation": 0, "aggregates": []},
        ),
        # a provider of another host becomes a sharing provider
        ev(
            "traits.set",
            OTHER,
            {"generation": 1, "traits": ["MISC_SHARES_VIA_AGGREGATE"]},
            {"generation": 0, "traits": []},
        ),
    ]
    for event in cases:
        assert judge([event], feed_cache.snapshot(), SHARING).stale == {CN}, event


def test_what_the_cache_shows_already_changes_nothing(feed_cache: ProviderTree) -> None:
    cases = [
        ev(
            "provider.created",
            CELL,
            {  # our own creation
                "name": "cell",
                "generation": 0,
                "parent_provider_uuid": CN,
                "root_provider_uuid": CN,
            },
        ),
        ev(
            "provider.updated",
            CELL,
            {"name": "cell", "generation": 2, "parent_provider_uuid": CN, "root_provider_uuid": CN},
        ),
        ev("aggregates.set", CN, {"generation": 3, "aggregates": [AGG]}),
        ev("provider.deleted", "gone-uuid", None, {"name": "gone"}),
        ev("aggregates.set", OTHER, {"generation": 1, "aggregates": ["y"]}),
        ev("traits.set", OTHER, {"generation": 1, "traits": ["HW_X"]}),
        ev(
            "provider.created",
            OTHER,
            {
                "name": "o",
                "generation": 0,
                "parent_provider_uuid": None,
                "root_provider_uuid": OTHER,
            },
        ),
    ]
    for event in cases:
        judged = judge([event], feed_cache.snapshot(), SHARING)
        assert (judged.stale, judged.everything) == (set(), False), event


@pytest.mark.parametrize("kind", ["resync", "resource_class.updated"])
def test_a_resync_or_class_rename_rereads_everything(feed_cache: ProviderTree, kind: str) -> None:
    judged = judge(
        [
            ev(kind, "CUSTOM_X", {"name": "CUSTOM_X"}),
            ev("traits.set", CELL, {"generation": 9, "traits": []}),
        ],
        feed_cache,
        SHARING,
    )
    assert judged.everything


def test_chunks_read_on_from_their_earliest_position() -> None:
    assert _earliest(["1:5,7:3"]) == "1:5,7:3"
    assert _earliest(["1:5,7:3", "1:4,7:9"]) == "1:4,7:3"
    assert _earliest(["1:5", "1:6,7:2"]) == "1:5"  # slot 7 from its start
    assert _earliest(["0", "1:2"]) == "0"
