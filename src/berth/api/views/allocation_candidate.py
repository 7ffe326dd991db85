"""The body of ``GET /allocation_candidates``, and the encoded provider
summaries the application keeps for the next answer
(``SummaryCache``, ``State.summaries``)."""

from __future__ import annotations

from typing import Any

import orjson

from berth.api.microversion import at_least
from berth.domain.allocation_candidate import engine
from berth.domain.allocation_candidate.engine import Result, Summary
from berth.domain.allocation_candidate.provider import Provider
from berth.domain.allocation_candidate.request import RequestGroup

#: The summary shape: the classes listed (None: all of them, from 1.27),
#: traits (1.17), parent and root (1.29).
Shape = tuple[frozenset[str] | None, bool, bool]


class SummaryCache:
    """Provider summaries, encoded, kept from one answer to the next: a
    summary costs more to encode than the search of a small answer, and
    schedulers are shown the same providers again and again.

    A world's provider objects never change once made (a usage or
    inventory change makes a new object), so a summary is good exactly
    as long as the world holds the very object it was encoded from: each
    entry keeps that object and is encoded again when the world holds
    another. One per application (``State.summaries``)."""

    def __init__(self) -> None:
        self._by_shape: dict[Shape, dict[int, tuple[Provider, bytes]]] = {}

    def shape(self, shape: Shape, providers: int
              ) -> dict[int, tuple[Provider, bytes]]:
        """provider id -> (the provider, its encoded summary) for
        ``shape``; emptied when it holds more than twice ``providers``
        (the size of the world now), so the entries of deleted providers
        do not pile up."""
        kept = self._by_shape.get(shape)
        if kept is None or len(kept) > 2 * providers:
            kept = self._by_shape[shape] = {}
        return kept


def serialize(result: Result, groups: list[RequestGroup],
              version: tuple[int, int], cache: SummaryCache
              ) -> dict[str, Any]:
    """The response body for ``version``, with the summaries ``cache``
    keeps. The answer's summaries and requests are joined from bytes
    (``Fragment``), byte for byte what encoding the dicts would give."""
    providers = result.world.providers
    if not at_least(version, "1.12"):
        return {"allocation_requests": [
            {"allocations": [
                {"resource_provider": {"uuid": providers[pid].uuid},
                 "resources": res}
                for pid, res in cand.allocs.items()]}
            for cand in result.candidates],
            "provider_summaries": _summaries(result, groups, version, cache)}
    return {"allocation_requests": _requests(result, at_least(version, "1.34")),
            "provider_summaries": _summaries(result, groups, version, cache)}


def _requests(result: Result, with_mappings: bool) -> orjson.Fragment:
    """The allocation requests, encoded. A candidate the search's memo
    keeps (``Candidate.memo``) keeps its encoded request too, for the
    next answer that lists it."""
    providers = result.world.providers
    key = ("request json", with_mappings)
    out = []
    for cand in result.candidates:
        memo = cand.memo
        if memo is not None:
            body = memo.get(key)
            if body is not None:
                out.append(body)
                continue
        item: dict[str, Any] = {"allocations": {
            providers[pid].uuid: {"resources": res}
            for pid, res in cand.allocs.items()}}
        if with_mappings:
            item["mappings"] = {
                s: ([providers[pids[0]].uuid] if len(pids) == 1
                    else sorted(providers[p].uuid for p in pids))
                for s, pids in cand.mappings.items()}
        body = orjson.dumps(item)
        if memo is not None:
            # A copy: orjson's own bytes keep its 4 KB buffer.
            body = memo[key] = b"%s" % body
        out.append(body)
    return orjson.Fragment(b"[%s]" % b",".join(out))


def _summaries(result: Result, groups: list[RequestGroup],
               version: tuple[int, int], cache: SummaryCache
               ) -> orjson.Fragment:
    # The shape depends on the version and, before 1.27, on the classes
    # asked for.
    wanted = (None if at_least(version, "1.27")
              else frozenset(rc for g in groups for rc in g.resources))
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
        body = b"%s:%s" % (orjson.dumps(p.uuid), orjson.dumps(_summary_body(
            engine.summary(world, pid), shape)))
        kept[pid] = (p, body)
        out.append(body)
    return orjson.Fragment(b"{%s}" % b",".join(out))


def _summary_body(summary: Summary, shape: Shape) -> dict[str, Any]:
    wanted, with_traits, nested = shape
    body: dict[str, Any] = {"resources": {
        rc: {"capacity": cap, "used": used}
        for rc, (cap, used) in summary.resources.items()
        if wanted is None or rc in wanted}}
    if with_traits:
        body["traits"] = summary.traits
    if nested:
        body["parent_provider_uuid"] = summary.parent_uuid
        body["root_provider_uuid"] = summary.root_uuid
    return body
