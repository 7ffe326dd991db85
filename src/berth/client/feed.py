"""Following Berth's change feed for the report client (``change_feed=True``).

Instead of re-checking every cached tree each refresh interval, the client
reads ``GET /berth/changes`` once per interval for all its trees, from the
``Berth-Position`` of its first listing (list, then follow: no write can
fall in between), and re-reads only the trees the events say changed.
Inventories and traits of cached providers are applied from the event's
``new`` value without any request.

The feed is asked for the events of the client's trees and of the sharing
providers read with them (``tree=`` names them all, ``MAX_TREES`` a
request), so a client reads about its own trees only, however large the
cloud. What no tree filter shows, another host's provider becoming a
sharing provider of one of our aggregates, the client checks as without
the feed: one query per tree in an aggregate (``ReportClient``).

Allocation events are not asked for, although they would tell the
generations claims give our providers: the service filters trees after
reading every event of the page, so each follower's request would decode
every claim of the cloud since its last one: they cost more server CPU
per agent-round than the per-tree check (``bench/journal/2026-12-02.md``,
"The report client with the change feed"). Without them, the first
write on a provider after a claim answers a generation conflict once;
the client re-reads that tree and the agent's pass starts again, as
between two checks without the feed.

Events are judged here; :class:`berth.client.report.ReportClient` owns the
cache and decides when to poll. See docs/client.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from berth.client.exceptions import PlacementAPIError
from berth.client.provider_tree import SHARING_TRAIT, ProviderTree
from berth.domain.limits import MAX_TREES
from berth.position import Position

LOG = logging.getLogger(__name__)

PATH = "/berth/changes"
#: The kinds that can make a cached tree out of date (not claims: see
#: above); resource class and trait creations change no provider.
KINDS = (
    "provider.created",
    "provider.updated",
    "provider.deleted",
    "inventories.set",
    "traits.set",
    "aggregates.set",
    "resource_class.updated",
    "resync",
)
#: Kinds after which nothing cached can be trusted: a custom class renamed
#: (inventories are keyed by class name) or a write no event describes.
_EVERYTHING = frozenset(("resource_class.updated", "resync"))
#: Events per page; a poll reads on while the page says there is ``more``.
PAGE = 1000
#: Pages one poll reads at most; past that it gives up and the client
#: checks every tree itself (a backlog that large is cheaper to list).
MAX_PAGES = 10


class FeedUnavailable(Exception):
    """The feed cannot be followed by this client (``permanent``: upstream
    Placement or a policy that forbids it; else this round only)."""

    def __init__(self, reason: str, *, permanent: bool) -> None:
        super().__init__(reason)
        self.permanent = permanent


class FeedGone(Exception):
    """The history after the position was pruned (410): list again."""


Call = Callable[[str, str], Any]


@dataclass
class Follower:
    """The position a client follows the feed from, and how to read on."""

    call: Call
    #: None until the first listing's header (or after a 410).
    position: str | None = None
    #: Seconds (client clock) of the last poll or listing position.
    polled: float | None = None
    active: bool = True

    def listed(self, position: str | None, now: float) -> None:
        """A tree listing answered with ``position`` (its ``Berth-Position``
        header, None without one): follow from the first such position.
        No header means the service is not Berth: stop following."""
        if not self.active or self.position is not None:
            return
        if position is None:
            self.stop("the service sends no Berth-Position header (it is not Berth)")
            return
        self.position, self.polled = position, now

    def stop(self, reason: str) -> None:
        """Fall back to the interval refresh for good, saying why once."""
        if self.active:
            LOG.warning(
                "not following the change feed, checking each tree "
                "every refresh interval instead: %s",
                reason,
            )
        self.active = False

    def poll(self, now: float, trees: list[str]) -> list[dict[str, Any]]:
        """Every event about ``trees`` (provider uuids) after the
        position, and move the position past them: one request for up to
        ``MAX_TREES`` trees (more when there are more pages). Raises FeedGone
        (410: the position is forgotten) or FeedUnavailable."""
        after = self.position
        if after is None:
            raise FeedUnavailable("no position yet", permanent=False)
        found: list[dict[str, Any]] = []
        reached: list[str] = []
        for start in range(0, max(len(trees), 1), MAX_TREES):
            chunk = ",".join(trees[start : start + MAX_TREES])
            position = after
            for _ in range(MAX_PAGES):
                page = self._page(position, chunk)
                found += page["events"]
                position = page["position"]
                if not page["more"]:
                    break
            else:
                raise FeedUnavailable(
                    "more than %d events waiting" % (PAGE * MAX_PAGES), permanent=False
                )
            reached.append(position)
        # Each chunk read up to its own position: read on from the
        # earliest (events seen twice apply twice harmlessly).
        self.position, self.polled = _earliest(reached), now
        return found

    def _page(self, after: str, trees: str) -> dict[str, Any]:
        params = {"after": after, "kind": ",".join(KINDS), "limit": PAGE}
        if trees:
            params["tree"] = trees
        query = urlencode(params)
        try:
            page: dict[str, Any] = self.call("GET", PATH + "?" + query)
            return page
        except PlacementAPIError as exc:
            if exc.status == 410:
                self.position = None
                raise FeedGone(str(exc)) from exc
            if exc.status in (403, 404, 405):
                self.stop("%s answers %d" % (PATH, exc.status))
                raise FeedUnavailable(str(exc), permanent=True) from exc
            raise FeedUnavailable(str(exc), permanent=False) from exc


def _earliest(positions: list[str]) -> str:
    """Per slot, the smallest number of ``positions`` (``slot:seq,...``)."""
    if len(positions) == 1:
        return positions[0]
    return str(Position.earliest(Position.parse(p) for p in positions))


@dataclass
class Judged:
    """What a batch of events means for the cache."""

    #: Managed roots to read again whole.
    stale: set[str] = field(default_factory=set)
    #: Every managed tree must be read again.
    everything: bool = False
    #: Events applied to the cache in place.
    applied: int = 0


def judge(
    events: Iterable[Mapping[str, Any]], cache: ProviderTree, sharing: Mapping[str, list[str]]
) -> Judged:
    """Apply what can be applied to ``cache`` in place and say which
    managed trees (the keys of ``sharing``, each mapped to the sharing
    providers read with it) must be read again.

    An event whose value the cache already holds (the client's own write,
    or one a later read already showed) changes nothing: events carry
    whole values, and one older than the cached generation is skipped.
    """
    result = Judged()
    for event in events:
        if event["kind"] in _EVERYTHING:
            result.everything = True
            return result
        stale = _judge_one(event, cache, sharing)
        if stale is None:
            result.applied += 1
        else:
            result.stale |= stale
    return result


def _owners(provider: str, cache: ProviderTree, sharing: Mapping[str, list[str]]) -> set[str]:
    """The managed roots whose cached view holds ``provider``."""
    if not cache.exists(provider):
        return set()
    root = cache.get_provider_uuids_in_tree(provider)[0]
    return {r for r, shared in sharing.items() if r == root or root in shared}


def _in_aggregates(
    aggregates: set[str], cache: ProviderTree, sharing: Mapping[str, list[str]]
) -> set[str]:
    """The managed roots with a provider in one of ``aggregates``."""
    return {
        r
        for r in sharing
        if any(
            not aggregates.isdisjoint(cache.data(u).aggregates) for u in cache.get_provider_uuids(r)
        )
    }


def _judge_one(
    event: Mapping[str, Any], cache: ProviderTree, sharing: Mapping[str, list[str]]
) -> set[str] | None:
    """None when the event was applied in place (or changes nothing),
    else the managed roots to read again."""
    kind, subject = event["kind"], event["subject"]
    new, old = event["new"] or {}, event["old"] or {}
    owners = _owners(subject, cache, sharing)
    if kind.startswith("provider."):
        return _provider_event(kind, subject, new, owners, cache, sharing)
    if not owners:
        # Another host's provider: it matters only if it may have become
        # (or stopped being) a sharing provider of one of our trees.
        if kind == "aggregates.set":
            return (
                _in_aggregates(
                    set(new.get("aggregates", ())) | set(old.get("aggregates", ())), cache, sharing
                )
                or None
            )
        if kind == "traits.set" and _sharing_changed(new, old):
            return {
                r
                for r in sharing
                if any(cache.data(u).aggregates for u in cache.get_provider_uuids(r))
            } or None
        return None
    data = cache.data(subject)
    generation = new.get("generation")
    if data.generation is not None and generation is not None and generation < data.generation:
        return None  # older than what the cache holds
    if kind == "inventories.set":
        cache.update_inventory(subject, new["inventories"], generation)
        return None
    if kind == "traits.set":
        cache.update_traits(subject, new["traits"], generation)
        return owners if _sharing_changed(new, old) else None
    changed = cache.update_aggregates(subject, new["aggregates"], generation)
    # Sharing providers may join or leave with the aggregates.
    return owners if changed else None


def _sharing_changed(new: Mapping[str, Any], old: Mapping[str, Any]) -> bool:
    return (SHARING_TRAIT in new.get("traits", ())) != (SHARING_TRAIT in old.get("traits", ()))


def _provider_event(
    kind: str,
    subject: str,
    new: Mapping[str, Any],
    owners: set[str],
    cache: ProviderTree,
    sharing: Mapping[str, list[str]],
) -> set[str] | None:
    if kind == "provider.deleted":
        return owners or None  # our own delete left the cache
    if kind == "provider.created":
        if owners:
            return None  # our own creation, or read since
        return _owners(new.get("root_provider_uuid") or "", cache, sharing) or None
    # Renamed or moved: nothing to do if the cache shows it already.
    if owners:
        data = cache.data(subject)
        if (data.name, data.parent_uuid) == (new.get("name"), new.get("parent_provider_uuid")):
            return None
    return owners | _owners(new.get("root_provider_uuid") or "", cache, sharing) or None
