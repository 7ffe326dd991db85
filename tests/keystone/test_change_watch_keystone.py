"""The change feed's watch behind a real Keystone: the same
authentication as the API (a missing or bogus token is a Placement-format
401 naming Keystone), and the same policy narrowing (a project member
reads its own project's allocation events, with ``project`` set)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from support.change_watch import Stream
from support.keystone import Keystone


@pytest.mark.parametrize("token", [None, "not-a-token", "gAAAAABfake"])
def test_missing_or_bogus_token_is_401(
    watch_server: Any, keystone: Keystone, token: str | None
) -> None:
    stream = Stream(watch_server.port, "after=0", token=token)
    assert stream.resp.status == 401
    assert stream.resp.getheader("www-authenticate") == 'Keystone uri="%s"' % keystone.url
    (error,) = json.loads(stream.resp.read())["errors"]
    assert error["status"] == 401
    assert error["request_id"] == stream.resp.getheader("x-openstack-request-id")


def test_tokens_as_the_list(watch_server: Any, keystone: Keystone, tokens: dict[str, str]) -> None:
    assert Stream(watch_server.port, "after=now", token=tokens["admin"]).resp.status == 200
    tenant = keystone.ids["project:tenant-a"]
    # A member of tenant-a: its own project's events only, named.
    assert Stream(watch_server.port, "after=now", token=tokens["alice"]).resp.status == 403
    own = Stream(watch_server.port, "after=now&project=" + tenant, token=tokens["alice"])
    assert own.resp.status == 200
    assert set(own.frame()) == {"after"}
    other = keystone.ids["project:tenant-b"]
    assert (
        Stream(watch_server.port, "after=now&project=" + other, token=tokens["alice"]).resp.status
        == 403
    )
