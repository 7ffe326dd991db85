"""The API layer's cache of encoded allocation requests
(``views.allocation_candidate.EncodedCache``): the candidates the
search's memo keeps are encoded once and their bytes reused, byte for
byte what encoding them afresh gives; the domain's candidates carry no
bytes."""

from __future__ import annotations

import orjson

from berth.api.views.allocation_candidate import (
    REQUESTS_KEPT,
    EncodedCache,
    serialize,
)
from berth.domain.allocation_candidate.engine import Result, search
from berth.domain.allocation_candidate.merge import Candidate
from berth.domain.allocation_candidate.offers import GroupSpec
from berth.domain.allocation_candidate.request import RequestGroup, RequestWide
from berth.domain.allocation_candidate.world import World
from support.candidate_worlds import prov

GROUPS = [RequestGroup(resources={"VCPU": 2})]
LATEST = (1, 39)


def _world() -> World:
    return World([prov(i, inv={"VCPU": 4, "MEMORY_MB": 1024}) for i in range(1, 4)])


def _answer(world: World) -> Result:
    return Result(search(world, [GroupSpec(g) for g in GROUPS], RequestWide()), world)


def _body(result: Result, cache: EncodedCache, version: tuple[int, int] = LATEST) -> bytes:
    return orjson.dumps(serialize(result, GROUPS, version, cache))


def test_candidates_hold_no_encoded_bytes() -> None:
    assert "memo" not in Candidate._fields
    assert not any(isinstance(v, (bytes, dict)) for v in Candidate._field_defaults.values())


def test_kept_candidates_are_encoded_once_and_reused() -> None:
    world = _world()
    first = _answer(world)  # worked out: nothing kept yet
    assert not any(c.kept for c in first.candidates)
    cache = EncodedCache()
    _body(first, cache)
    assert cache.requests(3, with_mappings=True) == {}
    again = _answer(world)  # from the memo
    assert again.candidates and all(c.kept for c in again.candidates)
    body = _body(again, cache)
    kept = cache.requests(3, with_mappings=True)
    assert set(kept) == {id(c) for c in again.candidates}
    encoded = {id(c): kept[id(c)][1] for c in again.candidates}
    # The next answer reuses the very bytes, and they are what a fresh
    # cache encodes.
    assert _body(_answer(world), cache) == body == _body(again, EncodedCache())
    assert all(cache.requests(3, with_mappings=True)[k][1] is v for k, v in encoded.items())
    # Without mappings (before 1.34), a form of its own.
    assert cache.requests(3, with_mappings=False) == {}
    old = orjson.loads(_body(again, cache, (1, 33)))
    assert all("mappings" not in r for r in old["allocation_requests"])
    assert set(cache.requests(3, with_mappings=False)) == set(kept)


def test_a_changed_candidate_is_encoded_from_its_own_values() -> None:
    world = _world()
    _answer(world)
    again = _answer(world)
    cache = EncodedCache()
    _body(again, cache)
    # Another object (as after a refresh): its own amounts, not the
    # bytes kept for the one it replaces.
    other = [c._replace(allocs={pid: {"VCPU": 3} for pid in c.allocs}) for c in again.candidates]
    changed = orjson.loads(_body(Result(other, world), cache))
    assert all(
        r["allocations"][u]["resources"] == {"VCPU": 3}
        for r in changed["allocation_requests"]
        for u in r["allocations"]
    )


def test_the_cache_is_emptied_beyond_its_bound() -> None:
    cache = EncodedCache()
    kept = cache.requests(0, with_mappings=True)
    for i in range(2 * REQUESTS_KEPT + 1):
        kept[i] = (Candidate(i, {}, {}), b"")
    assert cache.requests(0, with_mappings=True) == {}
