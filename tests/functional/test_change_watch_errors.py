"""The watch server refuses a watch with the body the API gives for the
same failure: one error mapping (``berth.api.errors.from_exception``)
for both, the 409 of a transaction whose retries ran out and the
conflict it counts included (the 410 of a pruned position:
``test_change_watch``)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import pytest
import sqlalchemy as sa

from berth.api.errors import CONCURRENT_UPDATE
from berth.domain import change
from support.change_feed import position
from support.change_watch import FeedServer, Stream
from tests.conftest import Client


def _error(body: bytes) -> dict[str, Any]:
    """The one error object of a Placement error body, without its
    request id (each answer has its own)."""
    errors = json.loads(body)["errors"]
    assert len(errors) == 1
    errors[0].pop("request_id")
    return errors[0]  # type: ignore[no-any-return]


def _both(
    client: Client, watch_feed: FeedServer, after: str
) -> tuple[tuple[int, dict[str, Any]], tuple[int, dict[str, Any]]]:
    """(status, error) of ``GET /berth/changes`` and of its watch, from
    ``after``."""
    listed = client.get("/berth/changes", params={"after": after})
    stream = Stream(watch_feed.port, "after=" + after)
    try:
        watched = (stream.resp.status, _error(stream.resp.read()))
    finally:
        stream.close()
    return (listed.status_code, _error(listed.content)), watched


def test_retries_run_out_is_the_same_409_and_counted(
    client: Client, watch_feed: FeedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    start = position(client)

    def locked(*args: Any, **kwargs: Any) -> Any:
        raise sa.exc.OperationalError("SELECT", {}, sqlite3.OperationalError("database is locked"))

    # Every attempt of Database.run's loses, for both servers.
    monkeypatch.setattr(change, "read_feed", locked)
    listed, watched = _both(client, watch_feed, start)
    assert listed == watched
    assert listed[0] == 409 and listed[1]["code"] == CONCURRENT_UPDATE
    assert "nothing was changed" in listed[1]["detail"]
    # Counted as the app counts its own conflicts.
    conflicts = watch_feed.running.feed.metrics.conflicts.labels(CONCURRENT_UPDATE)
    assert conflicts._value.get() == 1


def test_the_api_address_says_where_the_watch_is_served(client: Client) -> None:
    # The route is in the API's document; on the API's own address a GET
    # says which listener serves it, and any other method is refused as
    # on every route.
    resp = client.get("/berth/changes/watch?after=0")
    assert resp.status_code == 404
    assert "[berth] watch_listen" in _error(resp.content)["detail"]
    resp = client.request("TRACE", "/berth/changes/watch")
    assert resp.status_code == 405
    assert resp.headers["allow"] == "GET"
