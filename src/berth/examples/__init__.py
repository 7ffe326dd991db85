"""Worked examples for driver authors (see docs/reshaping.md)."""
