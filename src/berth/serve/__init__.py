"""Serving the API: ``berth serve`` under gunicorn, and what ``berth.wsgi``
shares with it.

- ``master``: the gunicorn master (options, hooks, start-up, the run).
- ``edge``: the sync worker that answers what gunicorn refuses as Berth does.
- ``memory``: garbage-collector tuning and workers replaced for their memory.
- ``preload``: the world loaded in the master and shared by forked workers.
- ``metrics``: the Prometheus listener and the multiprocess folder.
- ``systemd``: READY, RELOADING and STOPPING for a ``Type=notify`` service.

Only ``master`` and ``edge`` import gunicorn.

``berth serve`` writes nothing under ``$HOME``: gunicorn's control
socket is off (``master``), and so is stevedore's entry-point cache
(:func:`no_entry_point_cache`).
"""

from __future__ import annotations


def no_entry_point_cache() -> None:
    """Keep stevedore (the plugin loader of oslo.* and keystoneauth) from
    writing its entry-point cache to ``~/.cache/python-entrypoints`` (or
    ``$XDG_CACHE_HOME``), making ``$HOME`` when it does not exist. Scanning
    the entry points happens once per process anyway: the file saves a
    server nothing. stevedore offers no switch but a ``.disable`` file
    in that very folder, so its cache object is told directly; a
    stevedore without it is left as it is."""
    try:
        from stevedore import _cache
    except ImportError:  # pragma: no cover - stevedore comes with oslo
        return
    cache = getattr(_cache, "_c", None)
    if cache is not None and hasattr(cache, "_disable_caching"):
        cache._disable_caching = True
