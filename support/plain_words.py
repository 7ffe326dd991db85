"""What people read on Berth's own surfaces (``/berth/*``, the CLI, the
dashboard): one line under 200 characters, with no pattern and no
schema (docs/explain-and-fit.md, "Errors")."""

from __future__ import annotations


def plain_line(line: str) -> str:
    """``line``, once checked to be plain words."""
    assert "\n" not in line and len(line) < 200, line
    assert not any(mark in line for mark in ("^[", "$'", "\\", "schema")), line
    return line
