"""What a copy reports (``berth.db.transfer``): each table's rows
counted on both sides, and what the verification found.

Every copy, import and export alike, ends with :func:`verify`, run
inside the writing transaction: it reads what was written back
(``dump.read``), counts each table against the source (the rows it had
plus those the copy ``added`` to complete it) and compares the two
databases' fingerprints (``dump.compare``), filling in the ``Report``
that decides whether the copy commits. ``transfer.verify_database`` runs the same
pass between two committed databases.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Connection

from berth.db import dump
from berth.db.dump import Dump


@dataclass
class TableCount:
    table: str
    source: int
    added: int
    target: int

    @property
    def ok(self) -> bool:
        return self.target == self.source + self.added


@dataclass
class Report:
    """What a copy did and what its verification found."""

    direction: str
    revision: str
    tables: list[TableCount] = field(default_factory=list)
    checks: dict[str, list[str]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.tables) and not any(self.checks.values())

    def failures(self) -> list[str]:
        """One line per table count or check that differs."""
        out = [
            "%s: source %d + %d added, target %d" % (c.table, c.source, c.added, c.target)
            for c in self.tables
            if not c.ok
        ]
        return out + [
            "%s: %s" % (name, "; ".join(diffs)) for name, diffs in self.checks.items() if diffs
        ]

    def as_dict(self) -> dict[str, Any]:
        return {
            "direction": self.direction,
            "revision": self.revision,
            "ok": self.ok,
            "tables": {
                c.table: {"source": c.source, "added": c.added, "target": c.target, "ok": c.ok}
                for c in self.tables
            },
            "checks": {
                name: {"ok": not diffs, "differences": diffs} for name, diffs in self.checks.items()
            },
            "seconds": {k: round(v, 3) for k, v in self.seconds.items()},
        }


def verify(
    conn: Connection,
    source: Dump,
    raw: dict[str, int],
    report: Report,
    clock: dict[str, float],
    *,
    consumer_types: bool,
) -> None:
    """Fill in ``report`` for ``source`` just written through ``conn``:
    each table's rows counted on both sides (``raw``: the source's before
    the copy completed it) and ``dump.compare``'s checks of the two, and
    ``clock["verify"]``, the seconds it took. Reads only; a copy that
    does not verify (``Report.ok``) is for the caller to roll back."""
    began = time.monotonic()
    report.tables = []  # the transaction may be a retry
    written = dump.read(conn, consumer_types=consumer_types)
    names = {
        "resource_classes": {r["name"] for r in source.classes.values()},
        "traits": {r["name"] for r in source.traits.values()},
    }
    target_rows = {"resource_classes": written.classes, "traits": written.traits}
    for table in dump.TABLES:
        if table in names:
            # The target may know more standard names than the source.
            target = sum(1 for r in target_rows[table].values() if r["name"] in names[table])
        else:
            target = written.count(table)
        report.tables.append(TableCount(table, raw[table], source.added.get(table, 0), target))
    report.checks = dump.compare(dump.fingerprint(source), dump.fingerprint(written))
    clock["verify"] = time.monotonic() - began
