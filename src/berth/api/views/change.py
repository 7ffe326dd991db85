"""The body of a change-feed event, as both forms of the feed write it
(``GET /berth/changes`` and its watch form, ``berth.serve.watch``)."""

from __future__ import annotations

from typing import Any

from berth.db import events
from berth.position import Position


def event_body(e: events.Stored) -> dict[str, Any]:
    """One event as the feed shows it (here and in its watch form)."""
    return {
        "position": str(Position(((e.slot, e.seq),))),
        "index": e.idx,
        "kind": e.kind,
        "subject": e.subject,
        "time": e.created_at,
        "new": e.new,
        "old": e.old,
    }
