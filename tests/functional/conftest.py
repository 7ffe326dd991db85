"""Fixtures of the functional tests that build a world in-process
(tests/README.md): the app, its clients and what they create. Those of
one module are named for what they give, so that none shadows another.
Databases of their own are in fixtures_databases.py, processes and
servers in fixtures_servers.py (both plugins of tests/conftest.py).
"""

from __future__ import annotations

import logging
import socket
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import schemathesis
from sqlalchemy.engine import Connection

from bench import world as bench_world
from berth.api.app import create_app
from berth.api.openapi_document import document
from berth.api.routes import ROUTES
from berth.db import events, setup
from berth.db import tables as t
from berth.db.engine import Database, create_engine
from berth.direct import PlacementDirect
from berth.serve import watch
from berth.serve.watch import feed as feed_mod
from support import campaign as cm
from support import dashboard_world as w
from support import watch_serve
from support.app_client import Client, Placement, make_conf
from support.bench_answers import ALLOCATIONS, HOSTS, dump
from support.change_watch import FeedServer, close_streams, wait_for
from support.databases import snapshot
from support.numbered_providers import AGG
from support.numbered_providers import uuid as numbered_uuid
from support.processes import Server, stop_group

# What test_hostile_input*.py and test_change_pages.py take from here.
__all__ = ["RP", "SLOTS", "snapshot"]


# -- test_aggregate.py --------------------------------------------------------
@pytest.fixture
def rp(client: Any) -> str:
    resp = client.post("/resource_providers", json={"name": "agg-rp"})
    assert resp.status_code == 200
    return "/resource_providers/%s/aggregates" % resp.json()["uuid"]


# -- test_allocation_write_consumer_lock.py -----------------------------------
@pytest.fixture
def skip_sqlite(backend: str) -> None:
    if backend == "sqlite":
        pytest.skip("SQLite has one writer: a write never interleaves")


# -- test_nova_port.py and test_client_*.py: the API in-process ---------------
@pytest.fixture
def direct(db: Database) -> Iterator[httpx.Client]:
    with PlacementDirect(make_conf(), db, latest_microversion=True) as http:
        yield http


# -- test_conf_opts.py --------------------------------------------------------
@pytest.fixture
def policy_conf(tmp_path: Path) -> dict[str, str]:
    """OS_PLACEMENT_CONFIG_DIR of a placement.conf naming a policy file
    that overrides one rule with its default and another with a change."""
    (tmp_path / "policy.yaml").write_text(
        '"placement:resource_providers:list": "rule:admin_or_service_api"\n'
        '"placement:usages": "role:admin"\n'
    )
    (tmp_path / "placement.conf").write_text(
        "[oslo_policy]\npolicy_file = %s\n" % (tmp_path / "policy.yaml")
    )
    return {"OS_PLACEMENT_CONFIG_DIR": str(tmp_path)}


# -- test_dashboard*.py -------------------------------------------------------
@pytest.fixture
def seeded(app: Any, client: Client) -> Client:
    w.seed(client)
    return client


@pytest.fixture
def browser(app: Any) -> Iterator[httpx.Client]:
    """What a browser sends: no token, no microversion, asks for HTML."""
    with httpx.Client(
        transport=httpx.WSGITransport(app=app),
        base_url="http://placement.test",
        headers={"accept": "text/html"},
    ) as c:
        yield c


# -- test_explain_and_fit.py --------------------------------------------------
@pytest.fixture
def cli_world(tmp_path: Path) -> Callable[..., str]:
    """``berth`` in-process over a SQLite database holding hosts h1 and
    h2 (4 VCPU each) in aggregate AGG: each call gives what it prints,
    or the line of the error it exits with."""
    from berth import conf as berth_conf
    from berth.cli import main
    from berth.direct import PlacementDirect

    conf = tmp_path / "placement.conf"
    conf.write_text(
        "[api]\nauth_strategy = noauth2\n[placement_database]\n"
        "connection = sqlite:///%s\n" % (tmp_path / "p.sqlite")
    )
    assert main(["db", "sync", "--config-file", str(conf)]) == 0
    with PlacementDirect(
        berth_conf.load(["--config-file", str(conf)]), microversion="latest"
    ) as http:
        for n in (1, 2):
            http.post("/resource_providers", json={"name": "h%d" % n, "uuid": numbered_uuid(n)})
            http.put(
                "/resource_providers/%s/inventories" % numbered_uuid(n),
                json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 4}}},
            )
            http.put(
                "/resource_providers/%s/aggregates" % numbered_uuid(n),
                json={"resource_provider_generation": 1, "aggregates": [AGG]},
            )

    def run(*args: str) -> str:
        try:
            main([*args, "--config-file", str(conf)])
        except SystemExit as exc:
            return str(exc.code)
        return ""

    return run


# -- test_logs.py -------------------------------------------------------------
@pytest.fixture
def root_logging() -> Iterator[None]:
    """Put the root logger (pytest's handlers) back after ``logs.setup``."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    levels = {
        name: logging.getLogger(name).level for name in ("berth.request", "alembic", "sqlalchemy")
    }
    yield
    for handler in list(root.handlers):
        root.removeHandler(handler)
        if handler not in handlers:
            handler.close()
    for handler in handlers:
        root.addHandler(handler)
    root.setLevel(level)
    for name, value in levels.items():
        logging.getLogger(name).setLevel(value)


# -- test_memo.py -------------------------------------------------------------
@pytest.fixture
def memo_pair(db: Database) -> tuple[Client, Client]:
    kept = Client(create_app(make_conf(), db))
    fresh = Client(create_app(make_conf(berth__candidate_cache=False), db))
    return kept, fresh


# -- test_campaign.py ---------------------------------------------------------
CONSUMER = "0c2f7e6a-3b1d-4c5e-9a8f-1d2e3f4a5b6c"


@pytest.fixture
def campaign_world(client):
    """A provider with three inventories, a trait, an aggregate, a
    custom class and trait, and a consumer holding one VCPU."""
    c = client.at("latest")
    rp = str(uuid.uuid4())
    assert c.post("/resource_providers", json={"name": "root", "uuid": rp}).status_code == 200
    assert c.put("/resource_classes/CUSTOM_CAMPAIGN").status_code == 201
    assert c.put("/traits/CUSTOM_CAMPAIGN").status_code == 201
    r = c.put(
        cm._RP % rp + "/inventories",
        json={
            "resource_provider_generation": 0,
            "inventories": {"VCPU": cm._inv(), "MEMORY_MB": cm._inv(4096), "DISK_GB": cm._inv(100)},
        },
    )
    assert r.status_code == 200, r.text
    r = c.put(
        "/allocations/%s" % CONSUMER,
        json={
            "allocations": {rp: {"resources": {"VCPU": 1}}},
            "project_id": "proj",
            "user_id": "user",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        },
    )
    assert r.status_code == 204, r.text
    return cm.Ctx(client, rp, CONSUMER)


@pytest.fixture(scope="module")
def campaign_cases():
    """schemathesis' view of the document: one request strategy per
    operation, bodies and queries drawn from the handlers' schemas."""
    return schemathesis.openapi.from_dict(document(ROUTES))


# -- test_change_pages.py -----------------------------------------------------
#: Slots written by hand, as a three-node cluster would number them
#: (beyond any slot a test server uses).
SLOTS = (901, 902, 903)


@pytest.fixture
def before_slots(db: Database) -> Iterator[dict[int, int]]:
    """The position before the hand-made slots, which are removed after
    the test."""

    def clean(conn: Connection) -> None:
        for table, column in (
            (t.berth_events, t.berth_events.c.slot),
            (t.berth_state, t.berth_state.c.id),
        ):
            conn.execute(table.delete().where(column.in_(SLOTS)))

    db.run(clean)
    yield db.read(lambda conn: events.marks(conn)[0])
    db.run(clean)


# -- test_hostile_input*.py ---------------------------------------------------
# Fixed, not random: a parallel run (pytest -n) collects the same test ids
# in every worker.
RP = "5e8d4c3b-2a1f-4e0d-8c9b-7a6f5e4d3c2b"


@pytest.fixture
def hostile_world(client, db):
    r = client.post("/resource_providers", json={"name": "rp", "uuid": RP})
    assert r.status_code == 200, r.text
    inv = {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}}
    r = client.put("/resource_providers/%s/inventories" % RP, json=inv)
    assert r.status_code == 200, r.text
    return snapshot(db)


# -- test_resource_provider_tree.py -------------------------------------------
def _create(client: Any, name: str, parent: str | None = None) -> str:
    body: dict[str, Any] = {"name": name}
    if parent:
        body["parent_provider_uuid"] = parent
    resp = client.post("/resource_providers", json=body)
    assert resp.status_code == 200, resp.text
    return resp.json()["uuid"]  # type: ignore[no-any-return]


@pytest.fixture
def tree(client: Any) -> dict[str, str]:
    """root -> mid -> leaf, plus an unrelated root ``other``."""
    root = _create(client, "root")
    mid = _create(client, "mid", root)
    leaf = _create(client, "leaf", mid)
    other = _create(client, "other")
    return {"root": root, "mid": mid, "leaf": leaf, "other": other}


# -- test_bench_bulk.py -------------------------------------------------------
@pytest.fixture(scope="module")
def bulk_reference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    path = tmp_path_factory.mktemp("api-built") / "placement.sqlite"
    engine = create_engine("sqlite:///%s" % path)
    setup.prepare(engine)
    with Client(create_app(make_conf(), Database(engine))) as client:
        world = bench_world.build(
            "http://placement.test",
            hosts=HOSTS,
            allocations=ALLOCATIONS,
            threads=1,
            transport=client._transport,
        )
        answers = dump(client, world)
    engine.dispose()
    return answers


# -- test_change_restore.py ---------------------------------------------------
@pytest.fixture
def restored_placement(tmp_path: Path) -> Iterator[Placement]:
    found = Placement(tmp_path)
    yield found
    for client in found.workers:
        client.close()
    found.db.engine.dispose()


# -- test_change_watch_*.py: the watch server ---------------------------------
@pytest.fixture
def watch_feed(conf: Any, db: Database) -> Iterator[FeedServer]:
    """The watch server (``berth.serve.watch``) on the test's database."""
    server = FeedServer(conf, db)
    yield server
    server.close()


@pytest.fixture
def drain_feed(db: Database, monkeypatch: pytest.MonkeyPatch) -> Iterator[FeedServer]:
    """The watch server with kernel buffers of a few KiB and a drain
    timeout of 0.3 s: a watcher that stops reading stalls it at once."""
    listen = watch.listen_socket

    def small_buffers(host: str, port: int) -> socket.socket:
        # Connections inherit it: a few KiB fill the kernel's buffer.
        sock = listen(host, port)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        return sock

    monkeypatch.setattr(watch, "listen_socket", small_buffers)
    server = FeedServer(make_conf(berth__watch_drain_timeout=0.3), db)
    yield server
    server.close()


@pytest.fixture
def pg_feed(conf: Any, db: Database, monkeypatch: pytest.MonkeyPatch) -> Iterator[FeedServer]:
    """The watch server on PostgreSQL, polling only once a minute unless
    woken: an event that arrives within seconds was woken for."""
    if db.backend != "postgresql":
        pytest.skip("LISTEN/NOTIFY is PostgreSQL's")
    monkeypatch.setattr(feed_mod, "FALLBACK_POLL", 60.0)
    server = FeedServer(conf, db)
    wait_for(
        lambda: server.running.feed.listener is not None and server.running.feed.listener.listening,
        "the feed LISTENs",
    )
    yield server
    server.close()


@pytest.fixture(autouse=True)
def _close_watch_streams() -> Iterator[None]:
    """Every watch stream a test opened (``support.change_watch.Stream``)
    is closed after it."""
    yield
    close_streams()


# -- test_change_watch_serve.py: ``berth serve`` with its watch ---------------
@pytest.fixture(scope="module")
def served_watch(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """``berth serve`` (one worker, SQLite) with its watch on the next
    port, shared by a module's tests."""
    srv = watch_serve.start(tmp_path_factory.mktemp("watch-serve"))
    srv.wait_log("serving Placement API")
    srv.wait_log(watch_serve.PATTERN)
    yield srv
    stop_group(srv.proc)  # type: ignore[arg-type]
