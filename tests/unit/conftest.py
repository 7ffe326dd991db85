"""Fixtures of the unit tests (tests/README.md)."""

from __future__ import annotations

import pytest

from berth.api.openapi_document import document
from berth.api.routes import API
from berth.client import ProviderTree


@pytest.fixture(scope="module")
def doc():
    return document(API)


AGG = "agg-uuid"
CN, CELL, OTHER, POOL = "cn-uuid", "cell-uuid", "other-uuid", "pool-uuid"


@pytest.fixture
def feed_cache() -> ProviderTree:
    tree = ProviderTree()
    tree.new_root("cn", CN, 3)
    tree.new_child("cell", CN, CELL, 2)
    tree.update_aggregates(CN, [AGG])
    tree.new_root("pool", POOL, 7)  # a sharing provider
    tree.update_traits(POOL, ["MISC_SHARES_VIA_AGGREGATE"])
    return tree
