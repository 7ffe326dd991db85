"""``berth.wsgi:application`` for uwsgi/mod_wsgi deployments: configured
by OS_PLACEMENT_CONFIG_DIR, as upstream's entry point is."""

from __future__ import annotations

import os
import subprocess
import sys

from berth.serve.preload import uwsgi_one_at_a_time


def test_wsgi_entry_point_serves(tmp_path):
    (tmp_path / "placement.conf").write_text(
        "[api]\nauth_strategy = noauth2\n[placement_database]\n"
        "connection = sqlite:///%s\nsync_on_startup = True\n" % (tmp_path / "p.sqlite")
    )
    script = (
        "import httpx, berth.wsgi as w\n"
        "c = httpx.Client(transport=httpx.WSGITransport(app=w.application),"
        " base_url='http://x')\n"
        "print(c.get('/').status_code,"
        " c.get('/resource_providers', headers={'x-auth-token': 'admin'})"
        ".json())\n"
    )
    env = {**os.environ, "OS_PLACEMENT_CONFIG_DIR": str(tmp_path)}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "200 {'resource_providers': []}"
    assert (tmp_path / "p.sqlite").exists()


def test_wsgi_entry_point_loads_the_world_before_a_fork(tmp_path):
    """Imported by a forking server (here a stand-in ``uwsgi`` module):
    the world is loaded at import, the master keeps no connection, and
    the post-fork hook gives the worker a pool of its own."""
    (tmp_path / "placement.conf").write_text(
        "[api]\nauth_strategy = noauth2\n[placement_database]\n"
        "connection = sqlite:///%s\nsync_on_startup = True\n" % (tmp_path / "p.sqlite")
    )
    (tmp_path / "fake").mkdir()
    (tmp_path / "fake" / "uwsgi.py").write_text(
        "post_fork_hook = None\nopt = {'processes': b'2'}\n"
    )
    script = (
        "import uwsgi, berth.wsgi as w\n"
        "state = w.application.state\n"
        "engine = state.db.engine\n"
        "pool = engine.pool\n"
        "print(state.candidate_cache.latest is not None, pool.checkedin())\n"
        "uwsgi.post_fork_hook()\n"
        "print(engine.pool is not pool, state.candidate_cache.exclusive)\n"
    )
    env = {
        **os.environ,
        "OS_PLACEMENT_CONFIG_DIR": str(tmp_path),
        "PYTHONPATH": str(tmp_path / "fake"),
    }
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60
    )
    assert out.returncode == 0, out.stderr
    # One request at a time per worker: the world is edited in place.
    assert out.stdout.split() == ["True", "0", "True", "True"]


def test_uwsgi_workers_with_threads_copy_the_world() -> None:
    assert uwsgi_one_at_a_time({})
    assert uwsgi_one_at_a_time({"processes": b"4", "threads": b"1"})
    assert not uwsgi_one_at_a_time({"threads": b"4"})
    assert not uwsgi_one_at_a_time({"threads": [b"1", b"8"]})
    assert not uwsgi_one_at_a_time({"gevent": b"100"})
    assert not uwsgi_one_at_a_time({"async": b"10"})
