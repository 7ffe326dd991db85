"""Capacity arithmetic, shared by claims, inventory checks and candidates.

One definition everywhere: the usable amount of an inventory is
``int((total - reserved) * allocation_ratio)``, and one request for
``amount`` must also respect ``min_unit``, ``max_unit`` and ``step_size``.
"""

from __future__ import annotations

from typing import NamedTuple

from berth.domain.limits import MAX_INT

#: The largest usable amount, either sign, that Berth computes with: every
#: integer up to 2**53 is exact in a double, so Python, SQL and JSON
#: clients all see the same number (and it fits the 64 bits orjson writes).
#: Writes whose capacity would exceed it are refused (see
#: ``berth.domain.inventory.make_inventory``); a stored row beyond it,
#: which only a database written by something else can hold, is read as
#: this bound so that it cannot break a read.
MAX_CAPACITY = 2**53


class Inventory(NamedTuple):
    """One provider's inventory of one resource class (immutable; a named
    tuple because the candidate engine builds thousands per request and a
    frozen dataclass costs several times more to construct)."""

    total: int
    reserved: int = 0
    min_unit: int = 1
    max_unit: int = MAX_INT
    step_size: int = 1
    allocation_ratio: float = 1.0

    @property
    def capacity(self) -> int:
        return capacity(self.total, self.reserved, self.allocation_ratio)


def capacity(total: int, reserved: int, allocation_ratio: float) -> int:
    """Usable amount: (total - reserved) * allocation_ratio, truncated,
    and held within +-MAX_CAPACITY."""
    amount = (total - reserved) * allocation_ratio
    if -MAX_CAPACITY <= amount <= MAX_CAPACITY:
        return int(amount)
    return MAX_CAPACITY if amount > 0 else -MAX_CAPACITY


def unit_problem(inv: Inventory, amount: int) -> str | None:
    """Why ``amount`` breaks min_unit, max_unit or step_size, else None."""
    if amount < inv.min_unit:
        return "min_unit"
    if amount > inv.max_unit:
        return "max_unit"
    if inv.step_size and amount % inv.step_size != 0:
        return "step_size"
    return None


def fits(inv: Inventory, used: int, amount: int) -> bool:
    """True when ``amount`` more fits beside ``used`` and obeys the units."""
    return unit_problem(inv, amount) is None and used + amount <= inv.capacity
