"""Metrics under ``berth serve``: the multiprocess directory, the gunicorn
hooks that keep it right, and the ``[berth] metrics_listen`` listener.

gunicorn's workers are processes, so each keeps its metric values in
files under ``PROMETHEUS_MULTIPROC_DIR`` (prometheus-client's
multiprocess mode). ``berth serve`` makes that directory (unless the
operator set one) and removes it on exit; when a worker dies its live
gauges are dropped (``child_exit``). ``metrics_listen`` is served by the
master process, which reads every worker's files, without Keystone.
"""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from berth.conf import check

LOG = logging.getLogger(__name__)


@contextmanager
def multiprocess_dir() -> Iterator[str]:
    """Multiprocess mode for the block: the operator's
    ``PROMETHEUS_MULTIPROC_DIR``, else a new directory removed at the
    end (by the process that made it, never by a forked worker)."""
    from prometheus_client import values

    own = not os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if own:
        os.environ["PROMETHEUS_MULTIPROC_DIR"] = tempfile.mkdtemp(prefix="berth-metrics-")
    folder = os.environ["PROMETHEUS_MULTIPROC_DIR"]
    # prometheus-client picks file-backed values when it is imported;
    # pick again in case it was imported before the variable was set.
    values.ValueClass = values.get_value_class()  # type: ignore[no-untyped-call]
    master = os.getpid()
    try:
        yield folder
    finally:
        if own and os.getpid() == master:
            shutil.rmtree(folder, ignore_errors=True)
            del os.environ["PROMETHEUS_MULTIPROC_DIR"]


def gunicorn_hooks(listen: str | None, folder: str) -> dict[str, Callable[..., Any]]:
    """gunicorn settings: drop a dead worker's live gauges, and serve
    ``listen`` from the master once it is ready."""
    from prometheus_client import multiprocess

    def child_exit(server: Any, worker: Any) -> None:
        multiprocess.mark_process_dead(  # type: ignore[no-untyped-call]
            worker.pid, folder
        )

    hooks: dict[str, Callable[..., Any]] = {"child_exit": child_exit}
    if listen:
        host, port = check.parse_listen(listen, "metrics_listen")

        def when_ready(server: Any) -> None:
            import prometheus_client

            from berth.metrics import multiprocess_registry

            prometheus_client.start_http_server(
                port, addr=host, registry=multiprocess_registry(folder)
            )
            LOG.info("serving metrics on http://%s:%d/metrics", host, port)

        hooks["when_ready"] = when_ready
    return hooks
