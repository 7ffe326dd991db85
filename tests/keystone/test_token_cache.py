"""keystonemiddleware's token cache in memcached, shared by workers."""

from __future__ import annotations

import logging

from tests.keystone.conftest import client, memcached_stats


def test_validated_tokens_are_cached_in_memcached(
    keystone_app, keystone, memcached, caplog, sqlite_db
):
    token = keystone.token("nova", project="service")
    # Two apps stand for two workers (or two hosts): each has its own
    # process memory, and memcached is what they share.
    first, second = (keystone_app(memcached=memcached, db=sqlite_db) for _ in range(2))
    before = memcached_stats(memcached)
    with caplog.at_level(logging.WARNING, logger="keystonemiddleware"):
        with client(first, token) as c:
            assert c.get("/resource_providers").status_code == 200
    stored = memcached_stats(memcached)
    assert stored["cmd_set"] > before["cmd_set"]
    with client(second, token) as c:
        assert c.get("/resource_providers").status_code == 200
    after = memcached_stats(memcached)
    # The second worker found the token there and stored nothing new.
    assert after["get_hits"] > stored["get_hits"]
    assert after["cmd_set"] == stored["cmd_set"]
    # With memcached configured there is no in-process cache warning.
    assert not [r for r in caplog.records if "in-process" in r.getMessage()]


def test_in_process_cache_warns(keystone_app, keystone, caplog, sqlite_db):
    token = keystone.token("nova", project="service")
    with caplog.at_level(logging.WARNING, logger="keystonemiddleware"):
        with client(keystone_app(db=sqlite_db), token) as c:
            assert c.get("/resource_providers").status_code == 200
    assert [r for r in caplog.records if "in-process" in r.getMessage()]
