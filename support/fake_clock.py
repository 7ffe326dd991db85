"""A clock the test moves by hand (``clock.now += 60``), for code that
takes a ``clock`` callable (the report client's caches and feed)."""

from __future__ import annotations


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now
