"""Database layer: tables, engine set-up, transactions and migrations."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

if TYPE_CHECKING:
    import sqlalchemy as sa

# SQLAlchemy 2.1 types rows and queries with one parameter per column (PEP
# 646), so ``Row[Any]`` would be a one-column row. Berth reads rows by column
# name; these two say "any columns". Strings, so that nothing is subscripted
# at run time (SQLAlchemy 2.0's Row takes one tuple parameter instead).
AnyRow: TypeAlias = "sa.Row[*tuple[Any, ...]]"
AnySelect: TypeAlias = "sa.Select[*tuple[Any, ...]]"
