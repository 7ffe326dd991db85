"""Workers replaced for their private memory (``berth.serve.memory.Recycler``,
gunicorn's ``post_request`` hook), decided from readings of the worker's
memory that the tests supply."""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import Any

import pytest

from berth.metrics import Metrics
from berth.serve import memory

MIB = 1024 * 1024


class Readings:
    """A fake ``memory.memory``: the readings given, in turn."""

    def __init__(self, *found: tuple[int, int] | None) -> None:
        self.found = list(found)
        self.calls = 0

    def __call__(self) -> tuple[int, int] | None:
        self.calls += 1
        return self.found.pop(0)


def _worker(metrics: Metrics | None = None) -> Any:
    state = SimpleNamespace(metrics=metrics) if metrics else None
    return SimpleNamespace(alive=True, pid=4242, wsgi=SimpleNamespace(state=state))


def _sample(metrics: Metrics, name: str) -> float:
    value = metrics.registry.get_sample_value(name)
    assert value is not None, name
    return value


def test_a_worker_over_the_configured_limit_leaves_after_its_request() -> None:
    read = Readings((99 * MIB, 400 * MIB), (101 * MIB, 400 * MIB))
    recycle = memory.Recycler(100, every=0, read=read)
    metrics = Metrics()
    worker = _worker(metrics)
    recycle(worker, None, None, None)
    assert worker.alive
    assert _sample(metrics, "berth_worker_private_memory_bytes") == 99 * MIB
    recycle(worker, None, None, None)
    assert not worker.alive
    assert _sample(metrics, "berth_worker_private_memory_bytes") == 101 * MIB
    assert _sample(metrics, "berth_worker_recycles_total") == 1


def test_the_automatic_limit_is_a_third_of_the_shared_memory() -> None:
    # 300 MiB shared at the first reading: the limit is 100 MiB.
    read = Readings((10 * MIB, 300 * MIB), (100 * MIB, 100 * MIB), (101 * MIB, 90 * MIB))
    recycle = memory.Recycler(None, every=0, read=read)
    worker = _worker()
    recycle(worker)
    assert recycle.limit == 100 * MIB
    recycle(worker)
    assert worker.alive  # the limit is not moved by later readings
    recycle(worker)
    assert not worker.alive


def test_the_automatic_limit_has_a_floor() -> None:
    read = Readings((60 * MIB, 40 * MIB), (65 * MIB, 40 * MIB))
    recycle = memory.Recycler(None, every=0, read=read)
    worker = _worker()
    recycle(worker)
    assert recycle.limit == memory.MIN_PRIVATE_MEMORY * MIB
    assert worker.alive
    recycle(worker)
    assert not worker.alive


def test_memory_is_read_at_most_once_an_interval() -> None:
    read = Readings((500 * MIB, 400 * MIB))
    recycle = memory.Recycler(1000, every=3600, read=read)
    worker = _worker()
    for _ in range(5):
        recycle(worker)
    assert read.calls == 1
    assert worker.alive


def test_without_smaps_the_worker_is_never_checked_again() -> None:
    read = Readings(None)
    recycle = memory.Recycler(1, every=0, read=read)
    worker = _worker()
    recycle(worker)
    recycle(worker)
    assert read.calls == 1 and worker.alive


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/smaps_rollup")
def test_memory_reads_this_process() -> None:
    found = memory.memory()
    assert found is not None
    private, shared = found
    before = private
    block = bytearray(64 * MIB)  # touched: resident and this process's own
    block[::4096] = b"x" * len(block[::4096])
    found = memory.memory()
    assert found is not None
    assert found[0] - before >= 60 * MIB
    assert shared >= 0
    del block
