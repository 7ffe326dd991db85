"""Placeholder until this resource's handlers land."""

from __future__ import annotations

from typing import Any

from berth.api.errors import HTTPProblem


def __getattr__(name: str) -> Any:
    def missing(*args: Any, **kwargs: Any) -> None:
        raise HTTPProblem(404)
    return missing
