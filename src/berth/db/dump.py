"""Every row of a Placement database, and a fingerprint to compare two.

Upstream's tables and Berth's share table and column names, so one reader
serves both; what differs is how resource classes and traits are numbered,
which is why the ``Dump`` keeps them by name and the fingerprint speaks
only of names and uuids, never of row ids.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from berth.db import upstream

STAMPS = ("created_at", "updated_at")

#: The tables copied row for row (ids kept), parents before children,
#: with the columns copied.
COLUMNS: dict[str, tuple[str, ...]] = {
    "projects": ("id", "external_id"),
    "users": ("id", "external_id"),
    "consumer_types": ("id", "name"),
    "resource_providers": (
        "id",
        "uuid",
        "name",
        "generation",
        "root_provider_id",
        "parent_provider_id",
    ),
    "placement_aggregates": ("id", "uuid"),
    "resource_provider_aggregates": ("resource_provider_id", "aggregate_id"),
    "inventories": (
        "id",
        "resource_provider_id",
        "resource_class_id",
        "total",
        "reserved",
        "min_unit",
        "max_unit",
        "step_size",
        "allocation_ratio",
    ),
    "resource_provider_traits": ("resource_provider_id", "trait_id"),
    "consumers": ("id", "uuid", "project_id", "user_id", "generation", "consumer_type_id"),
    "allocations": ("id", "resource_provider_id", "consumer_id", "resource_class_id", "used"),
}
#: Every table the report counts, in the order it is written.
TABLES = ("resource_classes", "traits", *COLUMNS)

Row = dict[str, Any]


@dataclass
class Dump:
    """The rows of one database. Classes and traits are keyed by their id
    in that database; ``added`` counts rows made up to complete an old
    upstream database (see ``transfer``)."""

    classes: dict[int, Row] = field(default_factory=dict)
    traits: dict[int, Row] = field(default_factory=dict)
    rows: dict[str, list[Row]] = field(default_factory=dict)
    added: dict[str, int] = field(default_factory=dict)

    def count(self, table: str) -> int:
        if table == "resource_classes":
            return len(self.classes)
        if table == "traits":
            return len(self.traits)
        return len(self.rows.get(table, []))


def _select(conn: Connection, table: str, columns: tuple[str, ...]) -> list[Row]:
    # Typed stamps: SQLite keeps them as text, to be parsed back.
    tbl = sa.table(table, *[sa.column(c, sa.DateTime() if c in STAMPS else None) for c in columns])
    return [dict(r._mapping) for r in conn.execute(sa.select(tbl))]


def read(conn: Connection, *, consumer_types: bool = True) -> Dump:
    """Every row, in the caller's transaction (so one snapshot).

    ``consumer_types`` False reads an upstream database older than
    ``upstream.CONSUMER_TYPES_FROM``.
    """
    dump = Dump()
    for table, target in (("resource_classes", dump.classes), ("traits", dump.traits)):
        for row in _select(conn, table, ("id", "name", *STAMPS)):
            target[row["id"]] = row
    for table, columns in COLUMNS.items():
        if not consumer_types and table == "consumer_types":
            dump.rows[table] = []
            continue
        if not consumer_types and table == "consumers":
            columns = tuple(c for c in columns if c != "consumer_type_id")
        dump.rows[table] = _select(conn, table, columns + STAMPS)
    return dump


@dataclass(frozen=True)
class Fingerprint:
    """What a Placement database says, by names and uuids only."""

    class_names: frozenset[str]
    trait_names: frozenset[str]
    providers: dict[str, tuple[Any, ...]]
    inventories: dict[tuple[str, str], tuple[Any, ...]]
    usage: dict[tuple[str, str], int]
    provider_traits: frozenset[tuple[str, str]]
    provider_aggregates: frozenset[tuple[str, str]]
    consumers: dict[str, tuple[Any, ...]]


def fingerprint(dump: Dump) -> Fingerprint:
    """The names-only view of ``dump``; two databases that answer every
    Placement query alike have equal fingerprints (but for the classes and
    traits a newer release adds, which ``compare`` allows)."""
    cls = {i: r["name"] for i, r in dump.classes.items()}
    trait = {i: r["name"] for i, r in dump.traits.items()}
    rows = dump.rows
    rp = {r["id"]: r["uuid"] for r in rows["resource_providers"]}
    agg = {r["id"]: r["uuid"] for r in rows["placement_aggregates"]}
    project = {r["id"]: r["external_id"] for r in rows["projects"]}
    user = {r["id"]: r["external_id"] for r in rows["users"]}
    ctype = {r["id"]: r["name"] for r in rows["consumer_types"]}
    providers = {
        r["uuid"]: (
            r["name"],
            r["generation"] or 0,
            rp.get(r["parent_provider_id"]),
            rp.get(r["root_provider_id"]),
        )
        for r in rows["resource_providers"]
    }
    inventories = {
        (rp[r["resource_provider_id"]], _name(cls, r["resource_class_id"])): (
            r["total"],
            r["reserved"],
            r["min_unit"],
            r["max_unit"],
            r["step_size"],
            round(float(r["allocation_ratio"]), 6),
        )
        for r in rows["inventories"]
    }
    usage: dict[tuple[str, str], int] = defaultdict(int)
    held: dict[str, list[tuple[str, str, int]]] = defaultdict(list)
    for r in rows["allocations"]:
        key = (rp[r["resource_provider_id"]], _name(cls, r["resource_class_id"]))
        usage[key] += r["used"]
        held[r["consumer_id"]].append((*key, r["used"]))
    consumers = {
        r["uuid"]: (
            r["generation"],
            project[r["project_id"]],
            user[r["user_id"]],
            ctype.get(r.get("consumer_type_id")),
            tuple(sorted(held.pop(r["uuid"], []))),
        )
        for r in rows["consumers"]
    }
    # Allocations with no consumer record (possible before b5c396305c25).
    consumers.update(
        {uuid: (None, None, None, None, tuple(sorted(allocs))) for uuid, allocs in held.items()}
    )
    return Fingerprint(
        frozenset(cls.values()),
        frozenset(trait.values()),
        providers,
        inventories,
        dict(usage),
        frozenset(
            (rp[r["resource_provider_id"]], trait[r["trait_id"]])
            for r in rows["resource_provider_traits"]
        ),
        frozenset(
            (rp[r["resource_provider_id"]], agg[r["aggregate_id"]])
            for r in rows["resource_provider_aggregates"]
        ),
        consumers,
    )


def _name(classes: dict[int, str], class_id: int) -> str:
    name = classes.get(class_id) or upstream.standard_class_name(class_id)
    if name is None:
        raise ValueError("resource class id %d is used but not defined" % class_id)
    return name


#: The checks ``compare`` reports, by name.
CHECKS = (
    "resource classes",
    "traits",
    "providers",
    "inventories",
    "usage per provider and class",
    "provider traits",
    "provider aggregates",
    "consumers (generation, owner, type, allocations)",
)


def compare(source: Fingerprint, target: Fingerprint) -> dict[str, list[str]]:
    """For each of ``CHECKS``, the differences found (at most five
    examples each; an empty list means identical)."""
    found: dict[str, list[str]] = {}
    pairs: list[tuple[Any, Any]] = [
        (source.class_names - target.class_names, frozenset()),
        (source.trait_names - target.trait_names, frozenset()),
        (source.providers, target.providers),
        (source.inventories, target.inventories),
        (source.usage, target.usage),
        (source.provider_traits, target.provider_traits),
        (source.provider_aggregates, target.provider_aggregates),
        (source.consumers, target.consumers),
    ]
    for check, (want, got) in zip(CHECKS, pairs, strict=True):
        found[check] = _differences(want, got)
    return found


def _differences(want: Any, got: Any) -> list[str]:
    if isinstance(want, dict):
        keys = sorted(set(want) | set(got), key=repr)
        out = [
            "%s: source %r, target %r" % (k, want.get(k), got.get(k))
            for k in keys
            if want.get(k) != got.get(k)
        ]
    else:
        out = ["missing %r" % (k,) for k in sorted(want - got, key=repr)]
        out += ["extra %r" % (k,) for k in sorted(got - want, key=repr)]
    return out[:5] + (["... %d more" % (len(out) - 5)] if len(out) > 5 else [])
