"""Serving the API: ``berth serve`` under gunicorn, and what ``berth.wsgi``
shares with it.

- ``master``: the gunicorn master (options, hooks, start-up, the run).
- ``edge``: the sync worker that answers what gunicorn refuses as Berth does.
- ``memory``: garbage-collector tuning and workers replaced for their memory.
- ``preload``: the world loaded in the master and shared by forked workers.
- ``metrics``: the Prometheus listener and the multiprocess folder.

Only ``master`` and ``edge`` import gunicorn.
"""
