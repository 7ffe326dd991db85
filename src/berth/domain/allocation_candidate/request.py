"""What a GET /allocation_candidates request asks for, once parsed.

Names stay names here (resource classes, traits, aggregate uuids); the
engine resolves them against the database when it runs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

#: A conjunction of disjunctions: every inner set needs one member present.
TraitExpr = tuple[frozenset[str], ...]


@dataclass(frozen=True)
class RequestGroup:
    """One request group: the unsuffixed one (``suffix == ""``) may spread
    over a tree and sharing providers; a suffixed one needs one provider."""

    suffix: str = ""
    resources: dict[str, int] = field(default_factory=dict)
    required: TraitExpr = ()
    forbidden: frozenset[str] = frozenset()
    member_of: tuple[frozenset[str], ...] = ()
    forbidden_aggs: frozenset[str] = frozenset()
    in_tree: str | None = None

    @property
    def same_provider(self) -> bool:
        return self.suffix != ""

    @property
    def trait_names(self) -> set[str]:
        """Every trait this group mentions (to resolve them all at once)."""
        names = set(self.forbidden)
        for any_of in self.required:
            names |= any_of
        return names


@dataclass(frozen=True)
class RequestWide:
    """Parameters that apply to the request as a whole."""

    limit: int | None = None
    group_policy: str | None = None
    root_required: frozenset[str] = frozenset()
    root_forbidden: frozenset[str] = frozenset()
    same_subtrees: tuple[frozenset[str], ...] = ()


#: The orders, by name (``[berth] candidate_order`` and ``order=``).
NAMES = ("uuid", "random", "spread", "pack")
#: Those ranked by a score.
SCORED = ("spread", "pack")

#: Nova's weighers' default multipliers (RAM, CPU, disk), per class.
DEFAULT_WEIGHTS = (("DISK_GB", 1.0), ("MEMORY_MB", 1.0), ("VCPU", 1.0))


class Order(NamedTuple):
    """How an answer is ordered: ``name`` one of ``NAMES``; ``weights``
    (class, weight) and ``preferences`` (trait, weight), sorted, count
    only in a scored order. (A named tuple: it keys a world's rankings,
    and its hash is then a C call, where a frozen dataclass's is a
    Python one, run several times a claim.)"""

    name: str = "uuid"
    weights: tuple[tuple[str, float], ...] = DEFAULT_WEIGHTS
    preferences: tuple[tuple[str, float], ...] = ()

    @property
    def scored(self) -> bool:
        return self.name in SCORED


#: The strategy (``Settings.strategy``) when nothing bounds the search
#: (``max_allocation_candidates``): depth-first, except that with
#: ``limit`` each tree's first candidate comes before any tree's second,
#: so that a cut answer reaches as many hosts as it can
#: (``search.world_candidates``; ``[berth] candidate_hosts_first``).
HOSTS_FIRST = "hosts-first"


@dataclass(frozen=True)
class Settings:
    """The ``[placement]`` and ``[berth]`` options that shape the answer
    (``order``: ``[berth] candidate_order`` and its weights, or a
    request's own; ``random`` is ``randomize_allocation_candidates``)."""

    order: Order = Order()
    max_candidates: int = -1
    #: ``HOSTS_FIRST`` or upstream's ``allocation_candidates_generation_
    #: strategy`` (depth-first, breadth-first)
    strategy: str = HOSTS_FIRST
    #: candidates the search may keep for later requests (``[berth]
    #: candidate_memo``; 0: none)
    memo: int = 20_000
