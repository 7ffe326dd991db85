"""The change feed refuses a bad query (``GET /berth/changes``,
docs/change-feed.md): a 400 in Placement's error format, worded in one
plain line that names what is wrong, a refused kind listing every kind."""

from __future__ import annotations

import pytest

from berth.db import events
from support.plain_words import plain_line
from tests.conftest import Client


@pytest.mark.parametrize(
    "query",
    [
        {},
        {"after": "x"},
        {"after": "1:"},
        {"after": "1:2,1:3"},
        {"after": "-1:2"},
        {"after": "0", "kind": "provider.exploded"},
        {"after": "0", "tree": "not-a-uuid"},
        {"after": "0", "limit": "0"},
        {"after": "0", "consumer": "nope"},
        {"after": "0", "colour": "red"},
        # Longer than any cluster's position: refused before it is parsed.
        {"after": ",".join("%d:1" % n for n in range(1, 80))},
    ],
)
def test_bad_queries_are_400(client: Client, query: dict[str, str]) -> None:
    resp = client.get("/berth/changes", params=query)
    assert resp.status_code == 400, resp.text
    assert resp.json()["errors"][0]["status"] == 400


#: The kinds, as a refusal lists them.
KINDS = (
    "provider/resource_class.created/updated/deleted, "
    "inventories/traits/aggregates.set, allocations.replaced/removed, "
    "trait.created/deleted, resync"
)


@pytest.mark.parametrize(
    ("query", "line"),
    [
        (
            {"after": "0", "kind": "provider.create"},
            "unknown kind 'provider.create'; kinds: " + KINDS,
        ),
        ({"after": "0", "kind": "resync,bogus"}, "unknown kind 'bogus'; kinds: " + KINDS),
        ({"after": "0", "limit": "abc"}, "limit must be a whole number from 1 to 99999, not 'abc'"),
        ({"after": "0", "consumer": "nope"}, "consumer must be a consumer uuid, not 'nope'"),
        ({"afte": "0"}, "unknown query parameter 'afte' (did you mean after?)"),
        ({}, "after is required: a position from an earlier answer, or 0"),
    ],
)
def test_bad_queries_say_so_in_plain_words(
    client: Client, query: dict[str, str], line: str
) -> None:
    """A Berth-only surface: no pattern or schema in the answer, which
    ``berth watch`` prints as it is."""
    from berth.api.errors import for_people

    resp = client.get("/berth/changes", params=query)
    assert resp.status_code == 400, resp.text
    error = resp.json()["errors"][0]
    assert error["code"] == "placement.query.bad_value"
    assert plain_line(for_people(error["detail"])) == line
    assert len(resp.content) < 600


def test_a_bad_kind_lists_every_kind() -> None:
    named = set()
    for part in KINDS.split(", "):
        prefixes, _, suffixes = part.rpartition(".")
        named.update(
            "%s.%s" % (p, s) if p else s for p in prefixes.split("/") for s in suffixes.split("/")
        )
    assert named == set(events.KINDS)
