"""The allocation calls of :class:`~berth.client.ReportClient`.

They have the names and arguments of Nova's report client, so tools and
drivers written against it run unchanged; ``context`` (Nova's request
context) is accepted and ignored, and may be None. Each read-modify-write
call re-reads the consumer and tries again when Placement answers a
generation conflict (``placement.concurrent_update``), at most
``retries`` times in all, then raises AllocationUpdateFailed. Differences
from Nova are listed in docs/client.md.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import quote

from berth.client.exceptions import AllocationUpdateFailed, PlacementAPIError
from berth.client.http import ALLOCATION_VERSION, PROVIDER_VERSION, RP, Connection

LOG = logging.getLogger(__name__)

__all__ = ["AllocationCalls"]


def _consumer_conflict(exc: PlacementAPIError) -> bool:
    """A consumer generation conflict (as opposed to a provider race)."""
    return exc.is_conflict and "consumer generation" in exc.detail.lower()


def _resources_only(by_rp: Mapping[str, Any]) -> dict[str, Any]:
    """Allocations as a write wants them: per provider only resources."""
    return {
        rp: {"resources": dict(entry["resources"])}
        for rp, entry in by_rp.items()
        if entry.get("resources")
    }


def _newer(version: str | None, floor: str) -> str:
    def key(v: str) -> tuple[int, int]:
        major, _, minor = v.partition(".")
        return int(major), int(minor or 0)

    return floor if version is None or key(version) < key(floor) else version


class AllocationCalls:
    """Mixed into ReportClient: reading and writing consumers'
    allocations with bounded retries on generation conflicts."""

    _conn: Connection
    retries: int

    def _alloc(
        self,
        method: str,
        consumer: str,
        body: Any = None,
        ok: tuple[int, ...] = (200,),
        version: str = ALLOCATION_VERSION,
    ) -> Any:
        return self._conn.call(
            method, "/allocations/" + quote(consumer, safe=""), version, body, ok
        )

    def _retrying(self, consumer: str, what: str, attempt: Callable[[], bool]) -> bool:
        last: PlacementAPIError | None = None
        for _ in range(max(1, self.retries)):
            try:
                return attempt()
            except PlacementAPIError as exc:
                if not exc.is_conflict:
                    raise
                last = exc
                LOG.debug("%s of consumer %s met a conflict; retrying", what, consumer)
        raise AllocationUpdateFailed(
            consumer,
            "%s gave up after %d generation conflict(s)" % (what, max(1, self.retries)),
            last,
        )

    def get_allocs_for_consumer(self, context: object, consumer: str) -> dict[str, Any]:
        """``GET /allocations/{consumer}`` at 1.28: ``allocations`` (empty
        when there are none), and ``consumer_generation``, ``project_id``
        and ``user_id`` when there are. Raises PlacementAPIError."""
        found: dict[str, Any] = self._alloc("GET", consumer)
        return found

    def claim_resources(
        self,
        context: object,
        consumer_uuid: str,
        alloc_request: Mapping[str, Any],
        project_id: str,
        user_id: str,
        allocation_request_version: str | None = None,
        consumer_generation: int | None = None,
    ) -> bool:
        """Write ``alloc_request`` (``{"allocations": ...}``, e.g. one of
        the allocation requests of ``GET /allocation_candidates``) as the
        consumer's allocations. ``consumer_generation`` None means a new
        consumer.

        True when written, False when Placement refused it (no capacity,
        unknown provider; logged). Provider races are retried; a consumer
        generation conflict raises AllocationUpdateFailed at once (the
        caller's generation is stale, so retrying cannot help).
        """
        body = {
            "allocations": _resources_only(alloc_request["allocations"]),
            "project_id": project_id,
            "user_id": user_id,
            "consumer_generation": consumer_generation,
        }
        version = _newer(allocation_request_version, ALLOCATION_VERSION)

        def attempt() -> bool:
            try:
                self._alloc("PUT", consumer_uuid, body, (204,), version)
            except PlacementAPIError as exc:
                if _consumer_conflict(exc):
                    raise AllocationUpdateFailed(consumer_uuid, exc.detail, exc) from exc
                if exc.is_conflict:
                    raise
                LOG.warning("claim for consumer %s refused: %s", consumer_uuid, exc)
                return False
            return True

        return self._retrying(consumer_uuid, "claim", attempt)

    def _rewrite(
        self, consumer: str, current: Mapping[str, Any], allocations: Mapping[str, Any]
    ) -> None:
        self._alloc(
            "PUT",
            consumer,
            {
                "allocations": _resources_only(allocations),
                "project_id": current["project_id"],
                "user_id": current["user_id"],
                "consumer_generation": current["consumer_generation"],
            },
            (204,),
        )

    def move_allocations(
        self, context: object, source_consumer_uuid: str, target_consumer_uuid: str
    ) -> bool:
        """Give the target consumer the source's current allocations (and
        project and user), emptying the source, in one ``POST
        /allocations``. The target's own allocations are overwritten.

        True when moved, or when the source holds nothing and the target
        something (taken as already moved); False when neither holds
        anything. Raises AllocationUpdateFailed after ``retries`` conflicts.
        """
        src_id, dst_id = source_consumer_uuid, target_consumer_uuid

        def attempt() -> bool:
            source = self.get_allocs_for_consumer(context, src_id)
            target = self.get_allocs_for_consumer(context, dst_id)
            if not source["allocations"]:
                if target["allocations"]:
                    LOG.info(
                        "consumer %s holds nothing; its allocations were already moved to %s",
                        src_id,
                        dst_id,
                    )
                    return True
                LOG.warning("consumer %s holds nothing to move", src_id)
                return False
            owner = {"project_id": source["project_id"], "user_id": source["user_id"]}
            self._conn.call(
                "POST",
                "/allocations",
                ALLOCATION_VERSION,
                {
                    src_id: {
                        "allocations": {},
                        **owner,
                        "consumer_generation": source["consumer_generation"],
                    },
                    dst_id: {
                        "allocations": _resources_only(source["allocations"]),
                        **owner,
                        "consumer_generation": target.get("consumer_generation"),
                    },
                },
                (204,),
            )
            return True

        return self._retrying(src_id, "move", attempt)

    def remove_provider_tree_from_instance_allocation(
        self, context: object, consumer_uuid: str, root_rp_uuid: str
    ) -> bool:
        """Drop what the consumer holds on the tree of ``root_rp_uuid``
        (sharing providers outside that tree are kept).

        False when the consumer holds nothing at all, else True (also when
        it held nothing in that tree: nothing is written then). Raises
        AllocationUpdateFailed after ``retries`` conflicts.
        """

        def attempt() -> bool:
            current = self.get_allocs_for_consumer(context, consumer_uuid)
            if not current["allocations"]:
                LOG.warning("consumer %s holds no allocations", consumer_uuid)
                return False
            rows = self._conn.call(
                "GET", RP + "?in_tree=" + quote(root_rp_uuid, safe=""), PROVIDER_VERSION
            )
            tree = {r["uuid"] for r in rows["resource_providers"]}
            kept = {rp: e for rp, e in current["allocations"].items() if rp not in tree}
            if len(kept) != len(current["allocations"]):
                self._rewrite(consumer_uuid, current, kept)
            return True

        return self._retrying(consumer_uuid, "removing a provider tree", attempt)

    def remove_resources_from_instance_allocation(
        self, context: object, consumer_uuid: str, resources: Mapping[str, Mapping[str, Any]]
    ) -> bool:
        """Subtract ``resources`` (``{rp_uuid: {"resources": {rc: n}}}``)
        from the consumer's allocations. True when written (or nothing to
        remove). Raises AllocationUpdateFailed when the consumer does not
        hold that much, or after ``retries`` conflicts.
        """

        def attempt() -> bool:
            if not resources:
                return True
            current = self.get_allocs_for_consumer(context, consumer_uuid)
            left = {rp: dict(e["resources"]) for rp, e in current["allocations"].items()}
            for rp, entry in resources.items():
                for rc, amount in entry["resources"].items():
                    have = left.get(rp, {}).get(rc, 0)
                    if have < amount:
                        raise AllocationUpdateFailed(
                            consumer_uuid,
                            "holds %d %s on %s, cannot remove %d" % (have, rc, rp, amount),
                        )
                    left[rp][rc] = have - amount
            self._rewrite(
                consumer_uuid,
                current,
                {
                    rp: {"resources": {rc: n for rc, n in res.items() if n}}
                    for rp, res in left.items()
                },
            )
            return True

        return self._retrying(consumer_uuid, "removing resources", attempt)

    def delete_allocation_for_instance(
        self, context: object, uuid: str, consumer_type: str = "instance", force: bool = False
    ) -> bool:
        """Remove every allocation of consumer ``uuid``.

        By default the allocations are read and emptied with their
        consumer generation, retried on conflicts; ``force`` sends
        ``DELETE /allocations/{uuid}`` instead, whatever changed meanwhile.
        True when this call removed something, False when there was
        nothing. Raises AllocationUpdateFailed after ``retries`` conflicts.
        """
        if force:
            gone = self._alloc("DELETE", uuid, ok=(204, 404))
            return gone is None

        def attempt() -> bool:
            current = self.get_allocs_for_consumer(context, uuid)
            if not current["allocations"]:
                return False
            self._rewrite(uuid, current, {})
            LOG.info("deleted allocations of %s %s", consumer_type, uuid)
            return True

        return self._retrying(uuid, "deleting allocations", attempt)
