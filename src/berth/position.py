"""A position of the change sequence, and its text form.

How far each slot's counter had got (``berth.db.changes`` says what
slots and their numbers are). Clients see it as ``slot:seq`` pairs by
slot, comma separated (``1:42`` on a single database server; ``0``
before the first write): the ``Berth-Position`` header of every read,
the change feed's positions and its watch's ``after``. The server (the
sequence, the caches and memos, the feed and its watch) and the client
library use this one type, so it imports nothing of Berth.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, order=False)
class Position:
    """How far each slot's counter had got: sorted (slot, seq) pairs."""

    seqs: tuple[tuple[int, int], ...] = ()

    @classmethod
    def of(cls, seqs: Mapping[int, int]) -> Position:
        """The position of a slot -> seq map."""
        return cls(tuple(sorted(seqs.items())))

    @classmethod
    def parse(cls, text: str) -> Position:
        """The position ``str`` wrote; ValueError for anything else
        (a slot named twice, a part that is not ``slot:seq``)."""
        if text == "0":
            return cls()
        found: dict[int, int] = {}
        for pair in text.split(","):
            slot, colon, seq = pair.partition(":")
            if not (
                colon
                and slot.isdigit()
                and seq.isdigit()
                and len(slot) < 12
                and len(seq) < 19
                and int(slot) not in found
            ):
                raise ValueError("not a position: %r" % text)
            found[int(slot)] = int(seq)
        return cls.of(found)

    @classmethod
    def earliest(cls, positions: Iterable[Position]) -> Position:
        """Per slot, the smallest number of ``positions`` (a slot one of
        them does not name counts from its start)."""
        given = list(positions)
        slots = {slot for p in given for slot, _ in p.seqs}
        return cls.of({slot: min(p.get(slot) for p in given) for slot in slots})

    def __str__(self) -> str:
        """The text form: ``slot:seq`` pairs of the slots past their
        start, by slot, comma separated; ``0`` when none is."""
        return ",".join("%d:%d" % pair for pair in self.seqs if pair[1]) or "0"

    def get(self, slot: int) -> int:
        """The number ``slot`` had got to (0: none yet)."""
        for mine, seq in self.seqs:
            if mine == slot:
                return seq
        return 0

    @property
    def total(self) -> int:
        """Writes numbered so far, over all slots."""
        return sum(seq for _, seq in self.seqs)

    def __ge__(self, other: object) -> bool:
        """True when this position has seen all that ``other`` has."""
        if not isinstance(other, Position):
            return NotImplemented
        return all(self.get(slot) >= seq for slot, seq in other.seqs)

    def merged(self, other: Position) -> Position:
        """The position at or after both this one and ``other``."""
        if self >= other:
            return self
        out = dict(self.seqs)
        for slot, seq in other.seqs:
            if seq > out.get(slot, 0):
                out[slot] = seq
        return Position.of(out)

    def past(self, slot: int, seq: int) -> Position:
        """This position, moved on to ``seq`` in ``slot`` if behind it."""
        if self.get(slot) >= seq:
            return self
        return Position.of({**dict(self.seqs), slot: seq})
