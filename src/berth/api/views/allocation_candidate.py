"""The body of ``GET /allocation_candidates``, and the encoded parts of
it the application keeps for the next answer (``EncodedCache``,
``State.encoded``): the HTTP layer's bytes, never kept on the domain's
objects."""

from __future__ import annotations

from typing import Any

import orjson

from berth.api.microversion import at_least
from berth.domain.allocation_candidate import engine
from berth.domain.allocation_candidate.engine import Result, Summary
from berth.domain.allocation_candidate.merge import Candidate
from berth.domain.allocation_candidate.provider import Provider
from berth.domain.allocation_candidate.request import RequestGroup

#: The summary shape: the classes listed (None: all of them, from 1.27),
#: traits (1.17), parent and root (1.29).
Shape = tuple[frozenset[str] | None, bool, bool]


#: The search memo's default budget of candidates (``[berth]
#: candidate_memo``): encoded requests are kept, per form, for up to twice
#: that and two a provider (``EncodedCache.requests``).
REQUESTS_KEPT = 20_000


class EncodedCache:
    """Provider summaries and allocation requests, encoded, kept from one
    answer to the next: a summary costs more to encode than the search of
    a small answer, schedulers are shown the same providers again and
    again, and the search's memo hands out the very candidates it gave
    before. One per application (``State.encoded``).

    A world's provider objects never change once made (a usage or
    inventory change makes a new object), so a summary is good exactly
    as long as the world holds the very object it was encoded from: each
    entry keeps that object and is encoded again when the world holds
    another. Candidates never change either: a request is kept for a
    candidate the memo holds (``Candidate.kept``), by the object's
    identity, the entry holding the object so that its id is never
    another's."""

    def __init__(self) -> None:
        self._by_shape: dict[Shape, dict[int, tuple[Provider, bytes]]] = {}
        self._requests: dict[bool, dict[int, tuple[Candidate, bytes]]] = {False: {}, True: {}}

    def shape(self, shape: Shape, providers: int) -> dict[int, tuple[Provider, bytes]]:
        """provider id -> (the provider, its encoded summary) for
        ``shape``; emptied when it holds more than twice ``providers``
        (the size of the world now), so the entries of deleted providers
        do not pile up."""
        kept = self._by_shape.get(shape)
        if kept is None or len(kept) > 2 * providers:
            kept = self._by_shape[shape] = {}
        return kept

    def requests(
        self, providers: int, *, with_mappings: bool
    ) -> dict[int, tuple[Candidate, bytes]]:
        """id of a kept candidate -> (the candidate, its encoded
        request), with or without ``mappings``; emptied when it holds
        more than twice what the memo can hold in a world of
        ``providers`` providers, so the candidates the memo has dropped
        do not pile up."""
        kept = self._requests[with_mappings]
        if len(kept) > 2 * (REQUESTS_KEPT + providers):
            kept.clear()
        return kept


def serialize(
    result: Result, groups: list[RequestGroup], version: tuple[int, int], cache: EncodedCache
) -> dict[str, Any]:
    """The response body for ``version``, with the summaries and
    requests ``cache`` keeps. The answer's summaries and requests are
    joined from bytes (``Fragment``), byte for byte what encoding the
    dicts would give."""
    providers = result.world.providers
    if not at_least(version, "1.12"):
        return {
            "allocation_requests": [
                {
                    "allocations": [
                        {"resource_provider": {"uuid": providers[pid].uuid}, "resources": res}
                        for pid, res in cand.allocs.items()
                    ]
                }
                for cand in result.candidates
            ],
            "provider_summaries": _summaries(result, groups, version, cache),
        }
    with_mappings = at_least(version, "1.34")
    return {
        "allocation_requests": _requests(
            result, with_mappings, cache.requests(len(providers), with_mappings=with_mappings)
        ),
        "provider_summaries": _summaries(result, groups, version, cache),
    }


def _requests(
    result: Result, with_mappings: bool, kept: dict[int, tuple[Candidate, bytes]]
) -> orjson.Fragment:
    """The allocation requests, encoded; those of the candidates the
    search's memo keeps (``Candidate.kept``) kept in ``kept`` too, for
    the next answer that lists them."""
    providers = result.world.providers
    out = []
    for cand in result.candidates:
        if cand.kept:
            entry = kept.get(id(cand))
            if entry is not None:
                out.append(entry[1])
                continue
        item: dict[str, Any] = {
            "allocations": {
                providers[pid].uuid: {"resources": res} for pid, res in cand.allocs.items()
            }
        }
        if with_mappings:
            item["mappings"] = {
                s: (
                    [providers[pids[0]].uuid]
                    if len(pids) == 1
                    else sorted(providers[p].uuid for p in pids)
                )
                for s, pids in cand.mappings.items()
            }
        body = orjson.dumps(item)
        if cand.kept:
            # A copy: orjson's own bytes keep its 4 KB buffer.
            body = b"%s" % body
            kept[id(cand)] = (cand, body)
        out.append(body)
    return orjson.Fragment(b"[%s]" % b",".join(out))


def _summaries(
    result: Result, groups: list[RequestGroup], version: tuple[int, int], cache: EncodedCache
) -> orjson.Fragment:
    # The shape depends on the version and, before 1.27, on the classes
    # asked for.
    wanted = (
        None if at_least(version, "1.27") else frozenset(rc for g in groups for rc in g.resources)
    )
    shape = (wanted, at_least(version, "1.17"), at_least(version, "1.29"))
    world = result.world
    providers = world.providers
    kept = cache.shape(shape, len(providers))
    out = []
    for pid in result.summarized:
        p = providers[pid]
        entry = kept.get(pid)
        if entry is not None and entry[0] is p:
            out.append(entry[1])
            continue
        body = b"%s:%s" % (
            orjson.dumps(p.uuid),
            orjson.dumps(_summary_body(engine.summary(world, pid), shape)),
        )
        kept[pid] = (p, body)
        out.append(body)
    return orjson.Fragment(b"{%s}" % b",".join(out))


def _summary_body(summary: Summary, shape: Shape) -> dict[str, Any]:
    wanted, with_traits, nested = shape
    body: dict[str, Any] = {
        "resources": {
            rc: {"capacity": cap, "used": used}
            for rc, (cap, used) in summary.resources.items()
            if wanted is None or rc in wanted
        }
    }
    if with_traits:
        body["traits"] = summary.traits
    if nested:
        body["parent_provider_uuid"] = summary.parent_uuid
        body["root_provider_uuid"] = summary.root_uuid
    return body
