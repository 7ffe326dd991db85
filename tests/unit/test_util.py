"""``last-modified: now`` is formatted once a second, and always right."""

from __future__ import annotations

import datetime as dt

import falcon
import pytest

from berth.api import util


def test_now_is_formatted_once_a_second_and_follows_the_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    clock = [1_700_000_000.2]
    monkeypatch.setattr(util.time, "time", lambda: clock[0])
    monkeypatch.setattr(util, "_now", (-1, ""))
    formatted: list[dt.datetime] = []
    real = falcon.dt_to_http

    def counted(when: dt.datetime) -> str:
        formatted.append(when)
        return real(when)

    monkeypatch.setattr(util.falcon, "dt_to_http", counted)
    first = util._http_date(None)
    assert first == "Tue, 14 Nov 2023 22:13:20 GMT"
    clock[0] += 0.7  # the same second
    assert util._http_date(None) == first
    assert len(formatted) == 1
    clock[0] += 0.2  # the next one
    assert util._http_date(None) == "Tue, 14 Nov 2023 22:13:21 GMT"
    assert len(formatted) == 2
    # A given time is never taken from the kept "now".
    when = dt.datetime(2020, 1, 2, 3, 4, 5)
    assert util._http_date(when) == "Thu, 02 Jan 2020 03:04:05 GMT"
