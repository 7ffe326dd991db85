"""The agent loop: keep Placement in step with a driver, reshaping at start.

A driver implements :class:`Driver`. :class:`ResourceUpdater` runs the
flow of the "Handling Reshaped Provider Trees" spec for each node:

1. read the node's provider tree (creating the root provider if needed);
2. ask the driver to update it, without allocations;
3. if the driver raises ``ReshapeNeeded``: at start-up, read the tree's
   allocations and ask the driver again, with them (it edits them in
   place); at any other time, treat it like any other error;
4. flush the tree -- with the allocations, through one ``POST /reshaper``.

A generation conflict anywhere in a pass (the report client has refreshed
its cache by then) starts the pass again from step 1, up to the client's
``retries`` attempts in all. Errors left after that are logged and the
loop carries on -- at start-up too -- except a failed reshape, which is
fatal at start-up (the service must not run on a half-migrated tree), as
is a driver raising ``ReshapeNeeded`` again when it was given the
allocations. ``berth migrate-inventory`` (``berth.cli.migrate_inventory``) runs the
start-up pass offline through direct database access.
"""

from __future__ import annotations

import importlib
import logging
import threading
from dataclasses import dataclass
from typing import Protocol

from berth.client import (
    ProviderTree,
    ReportClient,
    ReshapeFailed,
    ReshapeNeeded,
    ResourceProviderUpdateFailed,
)
from berth.client.provider_tree import AllocationsDict

LOG = logging.getLogger(__name__)

__all__ = ["Driver", "NodeResult", "ResourceUpdater", "load_driver"]


class Driver(Protocol):
    """What the agent needs from a virt driver."""

    def get_available_nodes(self) -> list[str]:
        """Names of the nodes (root providers) this driver manages."""
        ...

    def update_provider_tree(
        self, provider_tree: ProviderTree, nodename: str, allocations: AllocationsDict | None = None
    ) -> None:
        """Edit ``provider_tree`` in place to describe ``nodename``.

        With ``allocations`` None the driver must not move inventory that
        may be allocated: it raises ``ReshapeNeeded`` instead. Given
        ``allocations`` (keyed by consumer uuid), it moves them along with
        the inventory, editing the dict in place.
        """
        ...


@dataclass(frozen=True)
class NodeResult:
    """The outcome of one pass over one node."""

    nodename: str
    #: "unchanged", "updated", "reshaped" or "failed"
    status: str
    writes: int = 0
    error: str | None = None


class ResourceUpdater:
    """Runs the driver-to-Placement flow for every node of a driver."""

    def __init__(self, driver: Driver, client: ReportClient) -> None:
        self.driver = driver
        self.client = client

    def sync_node(self, nodename: str, *, startup: bool) -> NodeResult:
        """One pass over ``nodename``, started again on a generation
        conflict up to ``client.retries`` attempts; every error left
        propagates."""
        attempts = self.client.retries
        for attempt in range(1, attempts + 1):
            try:
                return self._pass(nodename, startup)
            except ResourceProviderUpdateFailed as exc:
                if not exc.is_conflict or attempt == attempts:
                    raise
                LOG.info(
                    "generation conflict updating %s (attempt %d of "
                    "%d); trying again from a refreshed view",
                    nodename,
                    attempt,
                    attempts,
                )
        raise AssertionError("unreachable")  # pragma: no cover

    def _pass(self, nodename: str, startup: bool) -> NodeResult:
        tree = self.client.get_provider_tree_and_ensure_root(nodename)
        allocations = None
        try:
            self.driver.update_provider_tree(tree, nodename)
        except ReshapeNeeded:
            if not startup:
                raise
            LOG.info(
                "performing resource provider inventory and allocation data migration for %s",
                nodename,
            )
            allocations = self.client.get_allocations_for_provider_tree(nodename)
            try:
                self.driver.update_provider_tree(tree, nodename, allocations=allocations)
            except ReshapeNeeded as exc:
                raise ReshapeFailed(
                    "the driver raised ReshapeNeeded for %s although it was "
                    "given the allocations; that is a driver bug, and the "
                    "reshape was not attempted: %s" % (nodename, exc)
                ) from exc
        writes = self.client.update_from_provider_tree(tree, allocations=allocations)
        status = "reshaped" if allocations is not None else "updated" if writes else "unchanged"
        return NodeResult(nodename, status, writes)

    def update_node(self, nodename: str, *, startup: bool = False) -> NodeResult:
        """One pass, with Nova's error policy: a failed reshape at
        start-up raises; anything else is logged and reported."""
        try:
            return self.sync_node(nodename, startup=startup)
        except ReshapeFailed as exc:
            if startup:
                LOG.critical(
                    "resource provider data migration failed for "
                    "%s; the service must not start: %s",
                    nodename,
                    exc,
                )
                raise
            LOG.error("reshape of %s failed: %s", nodename, exc)
            return NodeResult(nodename, "failed", error=str(exc))
        except ResourceProviderUpdateFailed as exc:
            LOG.error(
                "updating resource provider tree of %s failed; the "
                "next pass starts from a refreshed view: %s",
                nodename,
                exc,
            )
            return NodeResult(nodename, "failed", error=str(exc))
        except Exception as exc:  # noqa: BLE001 - a periodic must survive
            LOG.exception("error updating resources of node %s", nodename)
            return NodeResult(nodename, "failed", error=str(exc))

    def update_all(self, *, startup: bool = False) -> list[NodeResult]:
        return [self.update_node(n, startup=startup) for n in self.driver.get_available_nodes()]

    def run(self, interval: float, stop: threading.Event) -> None:
        """Start-up pass, then a periodic pass every ``interval`` seconds
        until ``stop`` is set."""
        self.update_all(startup=True)
        while not stop.wait(interval):
            self.update_all()


def load_driver(spec: str) -> Driver:
    """Instantiate ``module:Class`` with no arguments."""
    module, _, name = spec.partition(":")
    if not module or not name:
        raise ValueError("driver must be given as module:Class, not %r" % spec)
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError("cannot load driver %s: %s" % (spec, exc)) from None
    driver: Driver = cls()
    return driver
