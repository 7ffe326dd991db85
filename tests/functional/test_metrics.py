"""Prometheus metrics: what each metric counts, in-process on every
backend, and under ``berth serve`` with several workers."""

from __future__ import annotations

import os
import signal
import subprocess
import urllib.request
import uuid as uuidlib
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from berth.api.app import create_app
from berth.conf.check import parse_listen
from berth.db.engine import Database
from support.processes import BERTH, free_port, run, wait_ready
from tests.conftest import Client, make_conf

RP = "00000000-0000-4000-8000-00000000000%d"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """(sample name, sorted labels) -> value."""
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(found: dict[Any, float], name: str, **labels: str) -> float:
    return found.get((name, tuple(sorted(labels.items()))), 0.0)


def _hosts(client: Client, count: int) -> None:
    for n in range(1, count + 1):
        assert (
            client.post("/resource_providers", json={"name": "h%d" % n, "uuid": RP % n}).status_code
            == 200
        )
        assert (
            client.put(
                "/resource_providers/%s/inventories" % (RP % n),
                json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 2}}},
            ).status_code
            == 200
        )


def _claim(client: Client, consumer: str, rp: str, gen: Any) -> int:
    return client.put(
        "/allocations/%s" % consumer,
        json={
            "allocations": {rp: {"resources": {"VCPU": 1}}},
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": gen,
            "consumer_type": "INSTANCE",
        },
    ).status_code


def test_metrics_count_what_happened(db: Database) -> None:
    # Its own Database object: the app observes the one it is given.
    app = create_app(make_conf(), Database(db.engine))
    with Client(app) as client:
        _hosts(client, 3)
        query = "/allocation_candidates?resources=VCPU:1"
        assert len(client.get(query).json()["allocation_requests"]) == 3
        assert len(client.get(query + "&limit=2").json()["allocation_requests"]) == 2
        # Exactly as many as exist: not cut.
        assert len(client.get(query + "&limit=3").json()["allocation_requests"]) == 3
        consumer = str(uuidlib.uuid4())
        assert _claim(client, consumer, RP % 1, None) == 204
        assert _claim(client, consumer, RP % 1, None) == 409
        assert client.get(query).status_code == 200
        gen = client.get("/resource_providers/%s" % (RP % 2)).json()["generation"]
        assert (
            client.put(
                "/resource_providers/%s/inventories" % (RP % 2),
                json={"resource_provider_generation": gen + 5, "inventories": {}},
            ).status_code
            == 409
        )
        assert client.get("/resource_providers/nope").status_code == 404
        assert client.request("BREW", "/traits").status_code == 400
        resp = client.get("/metrics")
        assert resp.status_code == 200
        assert resp.headers["content-type"].startswith("text/plain")
    found = samples(resp.text)
    v = lambda name, **labels: value(found, name, **labels)  # noqa: E731
    assert (
        v(
            "berth_requests_total",
            route="/allocation_candidates",
            method="GET",
            status="200",
            microversion="1.39",
        )
        == 4
    )
    assert (
        v(
            "berth_requests_total",
            route="/resource_providers/{uuid}",
            method="GET",
            status="404",
            microversion="1.39",
        )
        == 1
    )
    assert (
        v("berth_request_duration_seconds_count", route="/allocation_candidates", method="GET") == 4
    )
    methods = {
        dict(labels).get("method") for (name, labels) in found if name == "berth_requests_total"
    }
    assert "OTHER" in methods and "BREW" not in methods
    assert v("berth_claims_total", method="PUT", outcome="ok") == 1
    assert v("berth_claims_total", method="PUT", outcome="conflict") == 1
    assert v("berth_conflicts_total", code="placement.concurrent_update") == 2
    assert v("berth_candidates_returned_sum") == 3 + 2 + 3 + 3
    assert v("berth_candidates_returned_count") == 4
    assert v("berth_candidates_cut_by_limit_total") == 1
    assert v("berth_candidate_trees_searched_sum") == 12
    # One whole load, then the claim refreshed usage only.
    assert v("berth_world_refresh_duration_seconds_count", kind="whole") == 1
    assert v("berth_world_refresh_duration_seconds_count", kind="usage") == 1
    assert v("berth_world_lag_changes_sum") == 1
    assert v("berth_world_providers") == 3
    assert v("berth_world_resource_classes") >= 20
    assert v("berth_db_sql_statements_total") > 10
    assert v("berth_db_sql_seconds_total") > 0
    assert v("berth_db_connections_in_use") == 0
    assert ("berth_db_transaction_retries_total", ()) in found


def test_metrics_need_the_policy(app: Any) -> None:
    with Client(app, token="someone:project") as client:
        assert client.get("/metrics").status_code == 403
    with Client(app) as client:
        assert client.post("/metrics").status_code == 405


def test_transaction_retries_are_counted(db: Database) -> None:
    import sqlalchemy as sa

    mine = Database(db.engine)
    app = create_app(make_conf(), mine)
    attempts: list[int] = []

    class Locked(Exception):
        pass

    def flaky(conn: Any) -> int:
        attempts.append(1)
        if len(attempts) < 3:
            raise sa.exc.OperationalError("SELECT 1", {}, Locked("database is locked"))
        return 7

    assert mine.read(flaky) == 7
    with Client(app) as client:
        found = samples(client.get("/metrics").text)
    assert value(found, "berth_db_transaction_retries_total") == 2


@pytest.mark.parametrize(
    "text,expected",
    [
        ("127.0.0.1:9180", ("127.0.0.1", 9180)),
        ("[::1]:9180", ("::1", 9180)),
        ("0.0.0.0:0", ("0.0.0.0", 0)),
    ],
)
def test_parse_listen(text: str, expected: tuple[str, int]) -> None:
    assert parse_listen(text, "metrics_listen") == expected


@pytest.mark.parametrize("text", ["9180", "host:", ":9180", "h:99999", "h:port"])
def test_parse_listen_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="metrics_listen"):
        parse_listen(text, "metrics_listen")


def _get(url: str, token: str | None = None) -> tuple[int, str]:
    req = urllib.request.Request(url)
    if token:
        req.add_header("x-auth-token", token)
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_serve_adds_up_every_worker(tmp_path: Path) -> None:
    """Two workers, one listener without Keystone in the master; the
    multiprocess directory `berth serve` made is gone after it stops."""
    port, mport = free_port(), free_port()
    conf = tmp_path / "placement.conf"
    conf.write_text(
        "[api]\nauth_strategy = noauth2\n[placement_database]\n"
        "connection = sqlite:///%s\n[berth]\nmetrics_listen = 127.0.0.1:%d\n"
        % (tmp_path / "p.sqlite", mport)
    )
    run("db", "sync", "--config-file", str(conf))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "TMPDIR": str(scratch), "OS_PLACEMENT_CONFIG_DIR": ""}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    args = [*BERTH, "serve", "--port", str(port), "--workers", "2", "--config-file", str(conf)]
    with subprocess.Popen(args, stderr=subprocess.PIPE, env=env) as proc:
        try:
            api = "http://127.0.0.1:%d" % port
            wait_ready(api + "/", proc)
            assert [p.name for p in scratch.iterdir()][0].startswith("berth-metrics-")
            for _ in range(40):
                assert _get(api + "/resource_providers", "admin")[0] == 200
            status, text = _get("http://127.0.0.1:%d/metrics" % mport)
            assert status == 200
            found = samples(text)
            served = value(
                found,
                "berth_requests_total",
                route="/resource_providers",
                method="GET",
                status="200",
                microversion="1.0",
            )
            assert served == 40
            assert _get(api + "/metrics")[0] == 401
            assert _get(api + "/metrics", "admin")[0] == 200
        finally:
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err.decode()
    assert list(scratch.iterdir()) == []
