"""The world loaded once in the master and shared by forked workers
(``berth.serve.preload``): workers answer without a whole load of their own,
catch up on writes made after the master's load, and never use a
connection their parent opened."""

from __future__ import annotations

import gc
import json
import os
import re
import signal
import subprocess
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa

from berth.api.app import create_app
from berth.db import tables as t
from berth.db.engine import Database, create_engine
from berth.domain.allocation_candidate.cache import Refresh
from berth.serve import preload
from support.processes import BERTH, Server, free_port
from tests.conftest import Client, make_conf

HEADERS = {
    "x-auth-token": "admin",
    "accept": "application/json",
    "openstack-api-version": "placement latest",
}
#: oslo.log's default format: time, pid, level, logger, context, message
REFRESH = re.compile(
    r"^\S+ \S+ (\d+) DEBUG \S+ \[[^\]]*\] "
    r"candidate cache: (\w+) refresh",
    re.M,
)
WORKER = re.compile(r"Booting worker with pid: (\d+)")


def _provider(http: httpx.Client, name: str) -> str:
    """A new provider with 8 VCPU; its uuid."""
    rp = str(uuid.uuid4())
    assert http.post("/resource_providers", json={"name": name, "uuid": rp}).status_code == 200
    put = http.put(
        "/resource_providers/%s/inventories" % rp,
        json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}},
    )
    assert put.status_code == 200, put.text
    return rp


def _refreshes(log: str) -> list[tuple[int, str]]:
    return [(int(pid), kind) for pid, kind in REFRESH.findall(log)]


def _answer_from_every_worker(
    srv: Server, http: httpx.Client, pids: set[int], wanted: set[str]
) -> None:
    """Candidate requests, a few at once, until each of ``pids`` has
    refreshed its cache since now; every answer holds ``wanted``."""
    seen = len(_refreshes(srv.log_text()))
    for _ in range(200):
        with ThreadPoolExecutor(4) as pool:
            answers = list(
                pool.map(
                    lambda _: http.get("/allocation_candidates", params={"resources": "VCPU:1"}),
                    range(4),
                )
            )
        for resp in answers:
            assert resp.status_code == 200, resp.text
            assert set(resp.json()["provider_summaries"]) >= wanted
        done = {pid for pid, _ in _refreshes(srv.log_text())[seen:]}
        if pids <= done:
            return
    raise AssertionError("not every worker answered:\n" + srv.log_text())


def _serve(
    tmp_path: Path, db: Database, db_url: str, workers: int, berth: str = ""
) -> tuple[Server, set[str]]:
    """``berth serve`` with debug logs and ``berth`` as its [berth]
    section, over twelve providers made first; and their uuids."""
    conf = tmp_path / "placement.conf"
    conf.write_text(
        "[DEFAULT]\ndebug = True\n[api]\nauth_strategy = noauth2\n"
        "[placement_database]\nconnection = %s\n[berth]\n%s" % (db_url, berth)
    )
    # Enough providers that a few new ones are a partial refresh (changes
    # to a quarter of the world or more are a whole load anyway).
    with Client(create_app(make_conf(), db)) as client:
        loaded = {_provider(client, "old-%d" % i) for i in range(12)}
    port = free_port()
    log = tmp_path / "serve.log"
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [
                *BERTH,
                "serve",
                "--port",
                str(port),
                "--workers",
                str(workers),
                "--config-file",
                str(conf),
            ],
            stderr=sink,
            stdout=subprocess.DEVNULL,
            env={**os.environ, "OS_PLACEMENT_CONFIG_DIR": ""},
        )
    return Server(proc, port, log), loaded


def test_workers_share_the_masters_world(tmp_path: Path, db: Database, db_url: str) -> None:
    srv, loaded = _serve(tmp_path, db, db_url, 2)
    proc, port = srv.proc, srv.port
    try:
        srv.wait_log("serving Placement API")
        text = srv.wait_log(r"(?s)Booting worker.*Booting worker")
        workers = {int(p) for p in WORKER.findall(text)}
        assert len(workers) == 2
        assert "candidate cache: 12 providers loaded before forking" in text
        # The master loaded the world whole, before any worker existed.
        assert _refreshes(text) == [(proc.pid, "whole")]
        http = httpx.Client(base_url="http://127.0.0.1:%d" % port, headers=HEADERS, timeout=60)
        first = _provider(http, "first")
        _answer_from_every_worker(srv, http, workers, loaded | {first})
        # A worker restarted by gunicorn forks from the master's (now old)
        # world and catches up by the change sequence.
        os.kill(min(workers), signal.SIGKILL)
        text = srv.wait_log(r"(?s)Booting worker(.*Booting worker){2}")
        [new] = {int(p) for p in WORKER.findall(text)} - workers
        second = _provider(http, "second")
        _answer_from_every_worker(srv, http, {new}, loaded | {first, second})
        refreshes = _refreshes(srv.log_text())
        assert [r for r in refreshes if r[1] == "whole"] == [(proc.pid, "whole")], refreshes
        assert {kind for pid, kind in refreshes if pid == new} <= {"providers", "usage"}
        # The metrics count the one whole load too (the master's).
        body = http.get("/metrics").text
        [count] = re.findall(
            r"berth_world_refresh_duration_seconds_count"
            r'\{kind="whole"\} (\S+)',
            body,
        )
        assert float(count) == 1.0
        # A write outside Berth does not bump the change sequence: SIGHUP
        # makes the master load the world again for new workers.
        hidden = sorted(loaded)[0]
        with db.engine.begin() as conn:
            rp_id = conn.execute(
                sa.select(t.resource_providers.c.id).where(t.resource_providers.c.uuid == hidden)
            ).scalar_one()
            conn.execute(
                t.inventories.update()
                .where(t.inventories.c.resource_provider_id == rp_id)
                .values(total=0)
            )
        alive = {int(p) for p in WORKER.findall(srv.log_text())} - {min(workers)}
        proc.send_signal(signal.SIGHUP)
        srv.wait_log(r"(?s)(providers loaded before forking.*){2}")
        for pid in alive:
            _wait_gone(pid)
        resp = http.get("/allocation_candidates", params={"resources": "VCPU:1"})
        assert hidden not in resp.json()["provider_summaries"]
        assert second in resp.json()["provider_summaries"]
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, srv.log_text()


def _wait_gone(pid: int) -> None:
    """Until process ``pid`` has exited and been reaped."""
    for _ in range(600):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    raise AssertionError("process %d still alive" % pid)


def _backend_pid(conn: Any, backend: str) -> Any:
    """Who the database thinks this connection is."""
    if backend == "postgresql":
        return conn.execute(sa.text("SELECT pg_backend_pid()")).scalar()
    if backend == "mysql":
        return conn.execute(sa.text("SELECT CONNECTION_ID()")).scalar()
    return id(conn.connection.dbapi_connection)


def test_a_forked_worker_catches_up_on_its_own_connections(db: Database, db_url: str) -> None:
    """Writes between the master's load and the fork are seen by the
    worker through a partial refresh; the worker's pool is its own and
    the parent's pooled connection survives the worker."""
    kinds: list[str] = []

    def heard(done: Refresh) -> None:
        kinds.append(done.kind)

    engine = create_engine(db_url)
    app = create_app(make_conf(), Database(engine), world_observers=[heard])
    with Client(app) as client:
        before = {_provider(client, "before-%d" % i) for i in range(8)}
        assert preload.warm(app)
        assert kinds == ["whole"]
        assert engine.pool.checkedin() == 0  # the master keeps none
        after = _provider(client, "after")
        with engine.connect() as conn:  # a pooled connection to inherit
            parent_id = _backend_pid(conn, engine.dialect.name)
        pool = engine.pool
        read, write = os.pipe()
        child = os.fork()
        if child == 0:  # the worker
            try:
                os.close(read)
                preload.after_fork(app)
                report = {"new_pool": engine.pool is not pool}
                resp = client.get("/allocation_candidates", params={"resources": "VCPU:1"})
                report["status"] = resp.status_code
                report["providers"] = sorted(resp.json()["provider_summaries"])
                report["kinds"] = kinds[1:]
                with engine.connect() as conn:
                    report["own"] = _backend_pid(conn, engine.dialect.name) != parent_id
                engine.dispose()  # the worker's own, closed
                os.write(write, json.dumps(report).encode())
            finally:
                os._exit(0)
        os.close(write)
        with os.fdopen(read) as pipe:
            report = json.loads(pipe.read())
        os.waitpid(child, 0)
        assert report == {
            "new_pool": True,
            "status": 200,
            "providers": sorted(before | {after}),
            "kinds": ["providers"],
            "own": True,
        }
        # The parent's connection was neither used nor closed by the child.
        with engine.connect() as conn:
            assert _backend_pid(conn, engine.dialect.name) == parent_id
            conn.execute(sa.text("SELECT 1"))
    engine.dispose()


def test_no_preload_without_the_cache(db: Database) -> None:
    kinds: list[str] = []
    app = create_app(
        make_conf(berth__candidate_cache=False),
        db,
        world_observers=[lambda done: kinds.append(done.kind)],
    )
    assert not preload.warm(app)
    assert kinds == []


def test_the_master_catches_up_before_forking(db: Database, caplog: Any) -> None:
    """``preload.refresh`` (gunicorn's ``pre_fork``): the master's world
    catches up by the change sequence, what that made is frozen for the
    next worker to share, and the master keeps no connection; a failure
    is logged, never raised."""
    kinds: list[str] = []
    app = create_app(make_conf(), db, world_observers=[lambda done: kinds.append(done.kind)])
    with Client(app) as client:
        before = {_provider(client, "before-%d" % i) for i in range(8)}
        assert preload.warm(app)
        after = _provider(client, "after")
        frozen = gc.get_freeze_count()
        gc.unfreeze()
        preload.refresh(app)
        assert kinds == ["whole", "providers"]
        cached = app.state.candidate_cache.latest
        assert {p.uuid for p in cached.world.providers.values()} == before | {after}
        assert gc.get_freeze_count() >= frozen > 0
        assert db.engine.pool.checkedin() == 0
        # Nothing new: nothing is refreshed, the same cached world stays.
        preload.refresh(app)
        assert kinds == ["whole", "providers"]
        assert app.state.candidate_cache.latest is cached

        def down(*args: Any, **kwargs: Any) -> Any:
            raise sa.exc.OperationalError("SELECT 1", {}, Exception("gone"))

        app.state.db.read = down
        with caplog.at_level("WARNING", logger="berth.server"):
            preload.refresh(app)
        assert "could not bring its world up to date" in caplog.text
        assert app.state.candidate_cache.latest is cached
    gc.unfreeze()


def test_a_worker_over_its_memory_limit_is_replaced_from_the_master(
    tmp_path: Path, db: Database, db_url: str
) -> None:
    """With a limit every worker passes, each worker leaves after one
    request; each replacement forks from a master that caught up first,
    so it answers with the writes before it without a refresh of its
    own."""
    srv, loaded = _serve(tmp_path, db, db_url, 1, "worker_private_memory = 1\n")
    proc, port = srv.proc, srv.port
    try:
        srv.wait_log("Booting worker")
        http = httpx.Client(base_url="http://127.0.0.1:%d" % port, headers=HEADERS, timeout=60)
        # Two writes, two workers: each leaves after its request.
        new = _provider(http, "new")
        text = srv.wait_log(r"(?s)(Booting worker.*){3}")
        assert text.count("private memory is over the limit of 1 MiB") >= 2
        resp = http.get("/allocation_candidates", params={"resources": "VCPU:1"})
        assert resp.status_code == 200, resp.text
        assert set(resp.json()["provider_summaries"]) == loaded | {new}
        text = srv.wait_log("master's world caught up before forking")
        workers = {int(p) for p in WORKER.findall(text)}
        refreshes = _refreshes(text)
        # Every refresh was the master's: its load, then its catching up
        # before each fork. No worker had to refresh on its own.
        assert refreshes[0] == (proc.pid, "whole")
        assert {pid for pid, _ in refreshes} == {proc.pid}, refreshes
        assert {kind for _, kind in refreshes[1:]} == {"providers"}
        assert len(workers) >= 3
        metrics = http.get("/metrics").text
        [count] = re.findall(r"^berth_worker_recycles_total (\S+)$", metrics, re.M)
        assert float(count) >= 3
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, srv.log_text()
