"""The allocation-candidate engine."""
