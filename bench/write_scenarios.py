"""The scenarios of ``writes.py``: each prepares what it needs
(unmeasured) and sends one measured write (or read) through the app."""

from __future__ import annotations

import functools
import uuid
from typing import Any

import sqlalchemy as sa
from wsgi_meter import Client

CANDIDATES = "resources=VCPU:1,MEMORY_MB:512,DISK_GB:10&limit=5"


class Scenarios:
    """Each scenario: prepare (unmeasured), then one measured request."""

    def __init__(self, call: Client, url: str) -> None:
        self.call = call
        engine = sa.create_engine(url)
        with engine.connect() as conn:
            # Compute hosts with VCPU, in uuid order; a few spare ones
            # for inventory, trait and aggregate writes.
            rows = conn.execute(
                sa.text(
                    "SELECT rp.uuid FROM resource_providers rp JOIN inventories i "
                    "ON i.resource_provider_id = rp.id JOIN resource_classes rc "
                    "ON rc.id = i.resource_class_id WHERE rc.name = 'VCPU' AND "
                    "rp.parent_provider_id IS NULL ORDER BY rp.uuid"
                )
            ).all()
        engine.dispose()
        self.hosts = [r[0] for r in rows]
        self.n = 0

    def _next_host(self) -> str:
        self.n += 1
        return self.hosts[(self.n * 7) % len(self.hosts)]

    def _gen(self, host: str) -> int:
        return int(self.call("GET", "/resource_providers/%s" % host)["generation"])

    def _claim_body(
        self, host: str, generation: int | None = None, vcpu: int = 1
    ) -> dict[str, Any]:
        return {
            "allocations": {host: {"resources": {"VCPU": vcpu, "MEMORY_MB": 256}}},
            "project_id": "p-bench",
            "user_id": "u-bench",
            "consumer_generation": generation,
            "consumer_type": "INSTANCE",
        }

    # -- the claim cycle ------------------------------------------------
    def claim_get(self) -> None:
        """GET /allocation_candidates?...&limit=5 (no write in between)."""
        self.call("GET", "/allocation_candidates?" + CANDIDATES)

    def get_usages(self) -> None:
        """GET /resource_providers/{uuid}/usages of a host (a read, issue
        24's lagging one)."""
        self.call("GET", "/resource_providers/%s/usages" % self._next_host())

    def version(self) -> None:
        """GET / (the version document): what any request costs in the
        app, the floor of every scenario above it."""
        self.call("GET", "/")

    def claim_put(self) -> None:
        """PUT /allocations/{new consumer} of a candidate."""
        self._cycle(measure_get=False)

    def claim_cycle(self) -> None:
        """Both: the candidates (bringing the cache up to date after the
        claim before) and the claim of one of them."""
        self._cycle(measure_get=True)

    def _cycle(self, measure_get: bool) -> None:
        if measure_get:
            found = self.call("GET", "/allocation_candidates?" + CANDIDATES)
        else:
            with self._quiet():
                found = self.call("GET", "/allocation_candidates?" + CANDIDATES)
        body = found["allocation_requests"][self.n % 5]
        self.n += 1
        body.update(
            project_id="p-bench",
            user_id="u-bench",
            consumer_generation=None,
            consumer_type="INSTANCE",
        )
        self.call("PUT", "/allocations/%s" % uuid.uuid4(), body, 204)

    # -- other allocation writes -----------------------------------------
    def put_allocations_move(self) -> None:
        """PUT /allocations/{existing consumer} to another host."""
        consumer = str(uuid.uuid4())
        with self._quiet():
            self.call("PUT", "/allocations/%s" % consumer, self._claim_body(self._next_host()), 204)
        self.call("PUT", "/allocations/%s" % consumer, self._claim_body(self._next_host(), 1), 204)

    def post_allocations(self) -> None:
        """POST /allocations of two new consumers."""
        body = {str(uuid.uuid4()): self._claim_body(self._next_host()) for _ in range(2)}
        self.call("POST", "/allocations", body, 204)

    def delete_allocations(self) -> None:
        """DELETE /allocations/{consumer}."""
        consumer = str(uuid.uuid4())
        with self._quiet():
            self.call("PUT", "/allocations/%s" % consumer, self._claim_body(self._next_host()), 204)
        self.call("DELETE", "/allocations/%s" % consumer, None, 204)

    # -- provider writes ----------------------------------------------------
    def put_inventories(self) -> None:
        """PUT /resource_providers/{u}/inventories (all classes)."""
        host = self._next_host()
        with self._quiet():
            current = self.call("GET", "/resource_providers/%s/inventories" % host)
        inv = current["inventories"]
        inv["VCPU"]["reserved"] = 1 - inv["VCPU"].get("reserved", 0)
        self.call(
            "PUT",
            "/resource_providers/%s/inventories" % host,
            {
                "resource_provider_generation": current["resource_provider_generation"],
                "inventories": inv,
            },
        )

    def put_inventory(self) -> None:
        """PUT /resource_providers/{u}/inventories/VCPU."""
        host = self._next_host()
        with self._quiet():
            current = self.call("GET", "/resource_providers/%s/inventories/VCPU" % host)
        current["reserved"] = 1 - current.get("reserved", 0)
        self.call("PUT", "/resource_providers/%s/inventories/VCPU" % host, current)

    def put_traits(self) -> None:
        """PUT /resource_providers/{u}/traits."""
        host = self._next_host()
        with self._quiet():
            current = self.call("GET", "/resource_providers/%s/traits" % host)
        traits = set(current["traits"]) ^ {"CUSTOM_FAST"}
        self.call(
            "PUT",
            "/resource_providers/%s/traits" % host,
            {
                "resource_provider_generation": current["resource_provider_generation"],
                "traits": sorted(traits),
            },
        )

    def put_aggregates(self) -> None:
        """PUT /resource_providers/{u}/aggregates."""
        host = self._next_host()
        with self._quiet():
            current = self.call("GET", "/resource_providers/%s/aggregates" % host)
        aggs = set(current["aggregates"]) ^ {"00000000-0000-0000-0000-00000000bea7"}
        self.call(
            "PUT",
            "/resource_providers/%s/aggregates" % host,
            {
                "resource_provider_generation": current["resource_provider_generation"],
                "aggregates": sorted(aggs),
            },
        )

    def post_resource_provider(self) -> None:
        """POST /resource_providers (a child of a host)."""
        self.call(
            "POST",
            "/resource_providers",
            {"name": "bench-%s" % uuid.uuid4(), "parent_provider_uuid": self._next_host()},
        )

    def put_resource_provider(self) -> None:
        """PUT /resource_providers/{u} (a new name)."""
        host = self._next_host()
        self.call("PUT", "/resource_providers/%s" % host, {"name": "renamed-%s" % uuid.uuid4()})

    def delete_resource_provider(self) -> None:
        """DELETE /resource_providers/{u} (a leaf with inventory)."""
        with self._quiet():
            made = self.call(
                "POST",
                "/resource_providers",
                {"name": "bench-%s" % uuid.uuid4(), "parent_provider_uuid": self._next_host()},
            )
            self.call(
                "PUT",
                "/resource_providers/%s/inventories" % made["uuid"],
                {
                    "resource_provider_generation": made["generation"],
                    "inventories": {"SRIOV_NET_VF": {"total": 8}},
                },
            )
        self.call("DELETE", "/resource_providers/%s" % made["uuid"], None, 204)

    def reshaper(self) -> None:
        """POST /reshaper: a new host's VCPU moves to a new child, with
        the allocation of its one consumer."""
        self._bulk_reshape(1)

    # -- bulk writes (issue 24, item 3: they stay proportional) -----------
    def _bulk_move(self, count: int) -> None:
        """POST /allocations moving ``count`` existing consumers, each to
        another host, in one request."""
        consumers = [str(uuid.uuid4()) for _ in range(count)]
        with self._quiet():
            self.call(
                "POST",
                "/allocations",
                {c: self._claim_body(self._next_host()) for c in consumers},
                204,
            )
        self.call(
            "POST",
            "/allocations",
            {c: self._claim_body(self._next_host(), 1) for c in consumers},
            204,
        )

    # One request carrying 1, 10 or 100 consumers.
    move_1 = functools.partialmethod(_bulk_move, 1)
    move_10 = functools.partialmethod(_bulk_move, 10)
    move_100 = functools.partialmethod(_bulk_move, 100)

    def _bulk_reshape(self, count: int) -> None:
        """POST /reshaper: a new host's VCPU moves to a new child, with
        the allocations of its ``count`` consumers."""
        consumers = [str(uuid.uuid4()) for _ in range(count)]
        vcpu, memory = max(16, 2 * count), max(4096, 512 * count)
        with self._quiet():
            host = self.call("POST", "/resource_providers", {"name": "reshape-%s" % uuid.uuid4()})[
                "uuid"
            ]
            inv = self.call(
                "PUT",
                "/resource_providers/%s/inventories" % host,
                {
                    "resource_provider_generation": 0,
                    "inventories": {"VCPU": {"total": vcpu}, "MEMORY_MB": {"total": memory}},
                },
            )
            self.call("POST", "/allocations", {c: self._claim_body(host) for c in consumers}, 204)
            child = self.call(
                "POST",
                "/resource_providers",
                {"name": "numa-%s" % uuid.uuid4(), "parent_provider_uuid": host},
            )
        self.call(
            "POST",
            "/reshaper",
            {
                "inventories": {
                    host: {
                        "resource_provider_generation": inv["resource_provider_generation"] + 1,
                        "inventories": {"MEMORY_MB": {"total": memory}},
                    },
                    child["uuid"]: {
                        "resource_provider_generation": child["generation"],
                        "inventories": {"VCPU": {"total": vcpu}},
                    },
                },
                "allocations": {
                    c: {
                        "allocations": {
                            host: {"resources": {"MEMORY_MB": 256}},
                            child["uuid"]: {"resources": {"VCPU": 1}},
                        },
                        "project_id": "p-bench",
                        "user_id": "u-bench",
                        "consumer_generation": 1,
                        "consumer_type": "INSTANCE",
                    }
                    for c in consumers
                },
            },
            204,
        )

    # One request carrying 10 or 100 consumers.
    reshape_10 = functools.partialmethod(_bulk_reshape, 10)
    reshape_100 = functools.partialmethod(_bulk_reshape, 100)

    def _quiet(self) -> Any:
        meter = self.call.meter
        scen = self

        class Quiet:
            def __enter__(self) -> None:
                scen._was = meter.on
                meter.on = False

            def __exit__(self, *exc: object) -> None:
                meter.on = scen._was

        return Quiet()


NAMES = [
    "claim_get",
    "claim_put",
    "claim_cycle",
    "put_allocations_move",
    "post_allocations",
    "delete_allocations",
    "put_inventories",
    "put_inventory",
    "put_traits",
    "put_aggregates",
    "post_resource_provider",
    "put_resource_provider",
    "delete_resource_provider",
    "reshaper",
    "get_usages",
    "version",
]
#: Not in the default run: the bulk writes, by the consumers they carry.
#: (``reshaper`` is the reshape of one consumer.)
BULK = ["move_1", "move_10", "move_100", "reshape_10", "reshape_100"]
