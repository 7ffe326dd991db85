"""What the dashboard's pages say of amounts and counts, for people:
sizes in binary units, the capacity, used and free of a class in one
unit that adds up as shown, nouns that agree with their counts, and
explain's reasons in words. Used by its templates (the filters and
globals ``berth.api.views.dashboard_page`` registers)."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import ROUND_HALF_EVEN, Decimal

from berth.domain.dashboard import Amounts

#: Binary units of the size classes (MEMORY_MB, DISK_GB, CUSTOM_..._MB),
#: from the one the class counts in.
UNITS = ("KiB", "MiB", "GiB", "TiB", "PiB", "EiB")
_SIZE_STEP = {u[0] + "B": step for step, u in enumerate(UNITS)}


def unit(resource_class: str) -> str:
    """The unit ``resource_class`` counts in: "MB", "GB"... for a size
    class, "" for a count."""
    tail = resource_class.rpartition("_")[2]
    return tail if tail in _SIZE_STEP else ""


def _scaled(n: int, resource_class: str) -> tuple[Decimal, int]:
    """``n`` of the size class ``resource_class`` in the largest binary
    unit it reaches, and that unit's index in :data:`UNITS`."""
    step = _SIZE_STEP[unit(resource_class)]
    size = Decimal(abs(n))
    while size >= 1024 and step < len(UNITS) - 1:
        size /= 1024
        step += 1
    return size, step


def _places(size: Decimal) -> int:
    """Decimal places that give ``size`` about three figures."""
    return 0 if size >= 100 or size == int(size) else (1 if size >= 10 else 2)


def amount(n: int, resource_class: str) -> str:
    """``n`` of ``resource_class`` for people: a size in the largest
    binary unit it reaches (``2.49 TiB`` for 2,613,248 MEMORY_MB), a
    count with thousands separators."""
    if not unit(resource_class):
        return f"{n:,}"
    size, step = _scaled(n, resource_class)
    text = f"{size:,.{_places(size)}f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return "%s%s %s" % ("-" if n < 0 else "", text, UNITS[step])


@dataclass(frozen=True)
class Figures:
    """Capacity, used and free of one class as a page shows them side by
    side: one unit for the three, and free the difference of the other
    two as shown, so that a reader's sum works."""

    capacity: str
    used: str
    free: str


def figures(a: Amounts) -> Figures:
    """``a``'s capacity, used and free in the unit of its capacity (the
    largest one the capacity reaches), with the same decimal places:
    about three figures of the capacity, and enough that a use or free
    amount is never shown as 0 nor below 10 with no decimal (up to 3);
    counts as they are."""
    rc = a.resource_class
    if not unit(rc):
        return Figures(f"{a.capacity:,}", f"{a.used:,}", f"{a.free:,}")
    base = _SIZE_STEP[unit(rc)]
    _, top = _scaled(max(abs(a.capacity), abs(a.used)), rc)
    # A smaller unit only where three places would still show a use of
    # 1 MB in 4 TiB as 0 (in the class's own unit every figure shows).
    for step in range(top, base - 1, -1):
        per = Decimal(1024) ** (step - base)
        cap, used = Decimal(a.capacity) / per, Decimal(a.used) / per
        places = 0 if cap == int(cap) and used == int(used) else _places(abs(cap))
        while places < 3 and _hidden(places, cap, used):
            places += 1
        if not _hidden(places, cap, used):
            break
    shown = _rounded(places, cap, used)

    def text(v: Decimal) -> str:
        return "%s %s" % (f"{v:,.{places}f}" if v else "0", UNITS[step])

    return Figures(*(text(v) for v in shown))


def _rounded(places: int, cap: Decimal, used: Decimal) -> tuple[Decimal, Decimal, Decimal]:
    """Capacity and used rounded to ``places``, and free as their
    difference."""
    exp = Decimal(1).scaleb(-places)
    shown_cap = cap.quantize(exp, ROUND_HALF_EVEN)
    shown_used = used.quantize(exp, ROUND_HALF_EVEN)
    return shown_cap, shown_used, shown_cap - shown_used


def _hidden(places: int, cap: Decimal, used: Decimal) -> bool:
    """Whether ``places`` decimals would show a use or free amount that
    is not 0 as 0, or one under 10 with no decimal though it has
    some."""
    _, shown_used, shown_free = _rounded(places, cap, used)
    return any(
        v and (not shown or (not places and abs(v) < 10 and v != int(v)))
        for v, shown in ((used, shown_used), (cap - used, shown_free))
    )


def noun(n: int, word: str) -> str:
    """``word`` as it follows the count ``n``: "1 aggregate", "2
    aggregates" (every count noun of the pages takes an s)."""
    return word if n == 1 else word + "s"


#: Explain's reasons (``faults.KINDS``) in plain words; the page keeps
#: the code beside them, as the API and ``berth explain`` name it.
REASON_WORDS = {
    "root_required": "the root lacks a required trait or has a forbidden one",
    "in_tree": "not the tree in_tree names",
    "no_inventory": "no inventory of the class",
    "capacity": "not enough free capacity",
    "min_unit": "asks less than the inventory's min_unit",
    "max_unit": "asks more than the inventory's max_unit",
    "step_size": "not a multiple of the inventory's step_size",
    "trait_missing": "a required trait is missing",
    "trait_forbidden": "has a forbidden trait",
    "aggregate_missing": "not in an aggregate member_of asks for",
    "aggregate_forbidden": "in a forbidden aggregate",
    "same_subtree": "the groups cannot share a subtree (same_subtree)",
    "isolate": "the groups cannot each have their own provider (group_policy=isolate)",
    "other": "no single cause found (contradictory request)",
}
