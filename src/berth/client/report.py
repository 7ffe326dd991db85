"""``ReportClient``: keeps Placement in step with a driver's ProviderTree.

The client caches the provider trees it last read from Placement. A driver
edits a copy (``get_provider_tree_and_ensure_root``), and
``update_from_provider_tree`` sends only what differs between that copy and
the cache: providers created and deleted, inventories, traits and
aggregates replaced. With ``allocations``, every inventory change and the
allocations go through one ``POST /reshaper``, atomically.

Methods Nova's report client also has accept Nova's arguments as well
(a leading ``context``, which is ignored); see docs/client.md.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, overload
from urllib.parse import quote

import httpx

from berth.client import feed
from berth.client.allocations import AllocationCalls
from berth.client.compat import ensure_root_args, flush_args
from berth.client.exceptions import (
    PlacementAPIError,
    ProviderNotInTree,
    ReshapeFailed,
    ResourceProviderUpdateFailed,
)
from berth.client.flush import Flush
from berth.client.http import ALLOCATION_VERSION, PROVIDER_VERSION, RP, Connection, rp_path
from berth.client.provider_tree import SHARING_TRAIT, AllocationsDict, ProviderTree

LOG = logging.getLogger(__name__)

__all__ = ["ReportClient"]

#: How many times a pass or an allocation call is tried when Placement
#: answers a generation conflict (Nova tries four times too).
DEFAULT_RETRIES = 4
#: Seconds a cached tree is used without asking Placement (Nova's default).
DEFAULT_ASSOCIATION_REFRESH = 300.0


class ReportClient(AllocationCalls):
    """Reads and writes provider trees and allocations in Placement.

    ``http`` is an ``httpx.Client`` (base URL and auth headers set; the
    client of :class:`berth.direct.PlacementDirect` works) or a
    keystoneauth1 Session/Adapter. ``retries`` bounds the attempts on
    generation conflicts, of the allocation calls here and of each agent
    pass (:mod:`berth.client.agent`). Safe to share between threads: writes to
    the service are serialized by one lock.

    Trees stay cached between passes. For ``association_refresh`` seconds
    (Nova's ``resource_provider_association_refresh``, default 300; 0:
    never) after a tree was read, :meth:`get_provider_tree_and_ensure_root`
    answers from the cache without a request. After that it checks the
    tree with one ``GET /resource_providers?in_tree=`` (and one query for
    sharing providers when the tree is in aggregates) and reads it whole
    only if a generation moved. A failed write re-reads the trees it
    touched. ``clock`` (seconds, monotonic) is for tests.

    ``change_feed=True`` (Berth only; opt-in) replaces the per-tree check:
    once per ``association_refresh`` seconds the client reads Berth's
    change feed (one ``GET /berth/changes`` for all its trees, from the
    ``Berth-Position`` of its first listing), applies inventories and
    traits others set straight from the events, and reads again only the
    trees whose providers or aggregates changed. A pruned history (410)
    makes it read every tree again and follow from there; upstream
    Placement (no ``Berth-Position`` header, 404) or a policy that
    forbids the feed (403) makes it fall back to the per-tree check,
    logged once. See :mod:`berth.client.feed`.
    """

    def __init__(
        self,
        http: Any,
        *,
        interface: str = "internal",
        retries: int = DEFAULT_RETRIES,
        association_refresh: float = DEFAULT_ASSOCIATION_REFRESH,
        change_feed: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if retries < 1:
            raise ValueError("retries must be at least 1, not %r" % retries)
        if association_refresh < 0:
            raise ValueError("association_refresh must not be negative")
        self._conn = Connection(http, interface)
        self._lock = threading.RLock()
        self._cache = ProviderTree()
        self.retries = retries
        self.association_refresh = association_refresh
        self._clock = clock
        #: root uuid -> clock when its tree was last read or checked
        self._checked: dict[str, float] = {}
        #: root uuid -> the sharing roots read with it
        self._sharing: dict[str, list[str]] = {}
        self._feed = (
            feed.Follower(lambda method, path: self._call(method, path)) if change_feed else None
        )

    @classmethod
    def from_url(cls, url: str, token: str, timeout: float = 30.0) -> ReportClient:
        """A client for ``url`` sending ``X-Auth-Token: token``."""
        http = httpx.Client(
            base_url=url,
            timeout=timeout,
            headers={"x-auth-token": token, "accept": "application/json"},
        )
        return cls(http)

    def _call(
        self,
        method: str,
        path: str,
        version: str = PROVIDER_VERSION,
        body: Any | None = None,
        ok: tuple[int, ...] = (200,),
    ) -> Any:
        return self._conn.call(method, path, version, body, ok)

    # -- reading ----------------------------------------------------------

    def _find_provider(self, nodename: str, uuid: str | None) -> dict[str, Any] | None:
        if uuid is not None:
            try:
                found: dict[str, Any] = self._call("GET", rp_path(uuid))
                return found
            except PlacementAPIError as exc:
                if exc.status == 404:
                    return None
                raise
        rows = self._call("GET", RP + "?name=" + quote(nodename, safe=""))
        providers: list[dict[str, Any]] = rows["resource_providers"]
        return providers[0] if providers else None

    def _list_tree(self, root_uuid: str) -> list[dict[str, Any]]:
        """The providers of a tree; the first listing's position is where
        the change feed is followed from."""
        rows = self._call("GET", RP + "?in_tree=" + quote(root_uuid))
        if self._feed is not None:
            self._feed.listed(self._conn.position, self._clock())
        providers: list[dict[str, Any]] = rows["resource_providers"]
        return providers

    def _read_tree(self, root_uuid: str) -> ProviderTree:
        tree = ProviderTree()
        pending = self._list_tree(root_uuid)
        while pending:  # parents before children, whatever the order
            placed = [
                r
                for r in pending
                if r["parent_provider_uuid"] is None or tree.exists(r["parent_provider_uuid"])
            ]
            if not placed:
                raise ResourceProviderUpdateFailed("tree %s is not connected" % root_uuid)
            for row in placed:
                pending.remove(row)
                self._load_provider(tree, row)
        return tree

    def _load_provider(self, tree: ProviderTree, row: dict[str, Any]) -> None:
        uuid, parent = row["uuid"], row["parent_provider_uuid"]
        if parent is None:
            tree.new_root(row["name"], uuid, row["generation"])
        else:
            tree.new_child(row["name"], parent, uuid, row["generation"])
        inv = self._call("GET", rp_path(uuid, "/inventories"))
        tree.update_inventory(uuid, inv["inventories"])
        traits = self._call("GET", rp_path(uuid, "/traits"))
        tree.update_traits(uuid, traits["traits"])
        aggs = self._call("GET", rp_path(uuid, "/aggregates"))
        tree.update_aggregates(uuid, aggs["aggregates"], aggs["resource_provider_generation"])

    def _cache_tree(self, tree: ProviderTree) -> None:
        for root in tree.roots:
            if self._cache.exists(root):
                self._cache.remove(root)
            _graft(self._cache, tree, root)

    def _sharing_providers(self, tree: ProviderTree) -> list[dict[str, Any]]:
        """Root providers outside ``tree`` sharing through an aggregate of
        one of its providers (MISC_SHARES_VIA_AGGREGATE), as Nova adds
        them. A sharing provider that is itself a child is left out."""
        aggs = sorted({a for u in tree.get_provider_uuids() for a in tree.data(u).aggregates})
        if not aggs:
            return []
        rows = self._call(
            "GET",
            "%s?member_of=in:%s&required=%s" % (RP, quote(",".join(aggs), safe=","), SHARING_TRAIT),
        )
        return [
            r
            for r in rows["resource_providers"]
            if not tree.exists(r["uuid"]) and r["parent_provider_uuid"] is None
        ]

    @overload
    def get_provider_tree_and_ensure_root(
        self, nodename: str, uuid: str | None = None, parent_provider_uuid: str | None = None
    ) -> ProviderTree: ...

    @overload
    def get_provider_tree_and_ensure_root(
        self,
        context: object,
        rp_uuid: str,
        name: str | None = None,
        parent_provider_uuid: str | None = None,
    ) -> ProviderTree: ...

    def get_provider_tree_and_ensure_root(self, *args: Any, **kwargs: Any) -> ProviderTree:
        """The tree holding the provider (created if missing), freshly
        read from Placement, with the sharing providers associated to it
        through aggregates as extra roots. Edit the copy returned and hand
        it to :meth:`update_from_provider_tree`.

        Berth's form is ``(nodename, uuid=None, parent_provider_uuid=None)``
        (found by uuid if given, else by name); Nova's is ``(context,
        rp_uuid, name=None, parent_provider_uuid=None)``: a first argument
        that is not a string is taken as Nova's context.

        Raises PlacementAPIError if Placement cannot be read or written.
        """
        nodename, uuid, parent = ensure_root_args(args, kwargs)
        with self._lock:
            root = self._cached_root(uuid or nodename)
            if root is not None and self._current(root):
                return self._cached_subset([root] + self._sharing[root])
            row = self._find_provider(nodename, uuid)
            if row is None:
                body: dict[str, Any] = {"name": nodename}
                if uuid is not None:
                    body["uuid"] = uuid
                if parent is not None:
                    body["parent_provider_uuid"] = parent
                row = self._call("POST", RP, body=body)
                LOG.info("created resource provider %s (%s)", nodename, row["uuid"])
            root = row["root_provider_uuid"]
            tree = self._read_tree(root)
            sharing = self._sharing_providers(tree)
            for provider in sharing:
                self._load_provider(tree, provider)
            self._cache_tree(tree)
            self._sharing[root] = [p["uuid"] for p in sharing]
            self._checked[root] = self._clock()
            return tree.snapshot()

    def _cached_root(self, provider: str) -> str | None:
        """The root of a cached tree holding ``provider`` (not a sharing
        root read along with another tree)."""
        if not self._cache.exists(provider):
            return None
        root = self._root_of(provider)
        return root if root in self._sharing else None

    def _current(self, root: str) -> bool:
        """Is the cached tree of ``root`` still what Placement has?"""
        if self._following():
            return root in self._checked
        return self._recent(root) or self._still_current(root)

    def _following(self) -> bool:
        """Follow the change feed if it is due; False when the client is
        not following it (then each tree is checked as without it). A
        tree the feed says changed leaves ``_checked``: read it again."""
        follower = self._feed
        if follower is None or not follower.active:
            return False
        now = self._clock()
        if self.association_refresh == 0 or (
            follower.polled is not None and now - follower.polled < self.association_refresh
        ):
            return True
        trees = sorted({u for root, shared in self._sharing.items() for u in [root, *shared]})
        try:
            judged = feed.judge(follower.poll(now, trees), self._cache, self._sharing)
        except feed.FeedGone:
            LOG.info(
                "the change feed's history was pruned past this "
                "client's position; reading every tree again"
            )
            self._checked.clear()
            return True
        except feed.FeedUnavailable as exc:
            if exc.permanent:
                return False
            LOG.warning("could not read the change feed (%s); reading every tree again", exc)
            follower.polled = now
            self._checked.clear()
            return True
        if judged.everything:
            self._checked.clear()
        for root in judged.stale:
            self._checked.pop(root, None)
        for root in list(self._checked):
            # A provider of another tree joining one of our aggregates as
            # a sharing provider is no event of our trees: ask.
            if not self._same_sharing(root):
                self._checked.pop(root)
        return True

    def _same_sharing(self, root: str) -> bool:
        """Are the sharing providers of the tree of ``root`` those read
        with it? (No request for a tree in no aggregate.)"""
        found = self._sharing_providers(self._cached_subset([root]))
        return {r["uuid"] for r in found} == set(self._sharing.get(root, ()))

    def _recent(self, root: str) -> bool:
        checked = self._checked.get(root)
        if checked is None:
            return False
        return self.association_refresh == 0 or self._clock() - checked < self.association_refresh

    def _still_current(self, root: str) -> bool:
        """One cheap read (two with aggregates): do the cached tree and its
        sharing providers still have the generations Placement has?"""
        rows = self._list_tree(root)
        cached = {u: self._cache.data(u).generation for u in self._cache.get_provider_uuids(root)}
        if {r["uuid"]: r["generation"] for r in rows} != cached:
            return False
        sharing = self._sharing_providers(self._cached_subset([root]))
        known = {
            u: self._cache.data(u).generation for u in self._sharing[root] if self._cache.exists(u)
        }
        if {r["uuid"]: r["generation"] for r in sharing} != known:
            return False
        self._checked[root] = self._clock()
        return True

    def clear_provider_cache(self) -> None:
        """Forget every cached tree: the next call reads afresh."""
        with self._lock:
            self._cache = ProviderTree()
            self._checked.clear()
            self._sharing.clear()

    def get_allocations_for_provider_tree(
        self, *args: Any, nodename: str | None = None
    ) -> AllocationsDict:
        """``(nodename)``, or Nova's ``(context, nodename)``: every
        allocation of every consumer of the tree holding ``nodename``,
        keyed by consumer uuid, in the shape of ``GET /allocations/{consumer}``
        (1.28).

        Consumers are found through the tree's own providers; each one's
        full allocations are then read, including those on sharing
        providers outside the tree. Known limitation (as in the spec): a
        consumer whose *only* allocations are on sharing providers is not
        found, because sharing providers also serve other hosts.
        """
        if nodename is None:
            if not args:
                raise TypeError("get_allocations_for_provider_tree needs the nodename")
            nodename = str(args[-1])
        with self._lock:
            if not self._cache.exists(nodename):
                raise ProviderNotInTree(
                    "no provider %r was read yet; call get_provider_tree_and_ensure_root" % nodename
                )
            root = self._root_of(nodename)
            consumers: list[str] = []
            for uuid in self._cache.get_provider_uuids(root):
                found = self._call("GET", rp_path(uuid, "/allocations"))
                consumers += [c for c in found["allocations"] if c not in consumers]
            result: AllocationsDict = {}
            for consumer in consumers:
                record = self._call("GET", "/allocations/" + quote(consumer), ALLOCATION_VERSION)
                if record.get("allocations"):
                    result[consumer] = record
            return result

    def _root_of(self, provider: str) -> str:
        data = self._cache.data(provider)
        while data.parent_uuid is not None:
            data = self._cache.data(data.parent_uuid)
        return data.uuid

    # -- writing ----------------------------------------------------------

    def update_from_provider_tree(
        self, *args: Any, allocations: AllocationsDict | None = None
    ) -> int:
        """``(new_tree, allocations=None)``, or Nova's ``(context,
        new_tree, allocations=None)``: make Placement match ``new_tree``;
        return the writes made (0 when it already matched).

        ``allocations`` (None: no reshape) is the complete final picture
        for every consumer in it; then all inventory changes, the removed
        providers' emptied inventories and those allocations are written
        by one ``POST /reshaper``, and removed providers are deleted after.

        Raises ResourceProviderUpdateFailed after refreshing the cache:
        ReshapeFailed when a reshape was asked for and did not happen
        (the providers created for it were deleted again); ``is_conflict``
        when a generation conflict caused it.
        """
        new_tree, allocations = flush_args(args, allocations)
        with self._lock:
            old = self._cached_subset(new_tree.roots)
            diff = old.compare(new_tree)
            flush = Flush(self._call, old, new_tree, self.refresh_generations)
            try:
                flush.run(diff, allocations)
            except ValueError as exc:
                raise ResourceProviderUpdateFailed(str(exc)) from exc
            except PlacementAPIError as exc:
                self._refresh(new_tree.roots)
                raise _failure(flush, allocations is not None, exc) from exc
            self._cache_tree(flush.result())
            if diff.aggregates or any(new_tree.data(u).aggregates for u in diff.added):
                # Sharing providers may join or leave: check next time.
                for root in new_tree.roots:
                    self._checked.pop(root, None)
            return flush.writes

    def _cached_subset(self, roots: list[str]) -> ProviderTree:
        subset = ProviderTree()
        for root in roots:
            if self._cache.exists(root):
                _graft(subset, self._cache, root)
        return subset

    def _refresh(self, roots: list[str]) -> None:
        """Re-read ``roots`` after a failure (drop those now gone)."""
        for root in roots:
            self._checked.pop(root, None)
            if self._cache.exists(root):
                self._cache.remove(root)
            try:
                self._cache_tree(self._read_tree(root))
            except PlacementAPIError:
                LOG.warning("could not re-read provider tree %s", root)
            except ResourceProviderUpdateFailed:
                LOG.warning("provider tree %s is inconsistent", root)

    def refresh_generations(self, roots: list[str]) -> dict[str, int]:
        """Current generation of every provider in the trees of ``roots``."""
        gens: dict[str, int] = {}
        for root in roots:
            rows = self._call("GET", RP + "?in_tree=" + quote(root))
            gens.update({r["uuid"]: r["generation"] for r in rows["resource_providers"]})
        return gens


def _graft(dest: ProviderTree, source: ProviderTree, root: str) -> None:
    """Copy the tree of ``root`` from ``source`` into ``dest``."""
    for uuid in source.get_provider_uuids(root):
        d = source.data(uuid)
        if d.parent_uuid is None:
            dest.new_root(d.name, d.uuid, d.generation)
        else:
            dest.new_child(d.name, d.parent_uuid, d.uuid, d.generation)
        dest.update_inventory(uuid, d.inventory)
        dest.update_traits(uuid, d.traits)
        dest.update_aggregates(uuid, d.aggregates)


def _failure(flush: Flush, reshape: bool, exc: PlacementAPIError) -> ResourceProviderUpdateFailed:
    """The exception for a failed flush: ReshapeFailed when a reshape was
    asked for and not made, naming any provider its undo left behind."""
    if not reshape or flush.reshaped:
        return ResourceProviderUpdateFailed("updating provider tree failed: %s" % exc, exc)
    message = "reshape failed, nothing of it was applied: %s" % exc
    if flush.left_behind:
        message = (
            "reshape failed: %s; the empty provider(s) %s created "
            "for it could not be deleted again" % (exc, ", ".join(flush.left_behind))
        )
    return ReshapeFailed(message, exc)
