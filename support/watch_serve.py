"""``berth serve`` with its change-feed watch, as a subprocess over SQLite
in a folder of the test's (``start``), and the API requests the watch
tests make of it (``api``, ``new_provider``, ``position``)."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
import uuid as uuidlib
from pathlib import Path
from typing import Any

from support.processes import BERTH, Server, two_free_ports

PATTERN = r"serving the change feed's watch on \S+ \(pid (\d+)\)"


def config(tmp_path: Path, watch: str | None) -> Path:
    """A placement.conf: noauth2, SQLite in ``tmp_path``, and ``[berth]
    watch_listen = watch`` unless None."""
    conf = tmp_path / "placement.conf"
    conf.write_text(
        "[api]\nauth_strategy = noauth2\n"
        "[placement_database]\nconnection = sqlite:///%s\n%s"
        % (tmp_path / "db.sqlite", "" if watch is None else "[berth]\nwatch_listen = %s\n" % watch)
    )
    return conf


def start(tmp_path: Path, watch: bool = True, port: int | None = None) -> Server:
    """``berth serve`` with one worker on ``port`` (default: a free one),
    and its watch on the next port (unless not ``watch``)."""
    port = port or two_free_ports()
    conf = config(tmp_path, "127.0.0.1:%d" % (port + 1) if watch else None)
    log = tmp_path / "serve.log"
    env = {**os.environ, "OS_PLACEMENT_CONFIG_DIR": ""}
    subprocess.run(
        [*BERTH, "db", "sync", "--config-file", str(conf)],
        check=True,
        capture_output=True,
        env=env,
        timeout=120,
    )
    with log.open("wb") as sink:
        proc = subprocess.Popen(
            [*BERTH, "serve", "--port", str(port), "--workers", "1", "--config-file", str(conf)],
            stderr=sink,
            stdout=subprocess.DEVNULL,
            env=env,
            start_new_session=True,
        )
    return Server(proc, port, log)


def api(server: Server, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    """The status and headers of an API request (the body read)."""
    req = urllib.request.Request(
        "http://127.0.0.1:%d%s" % (server.port, path),
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={
            "x-auth-token": "admin",
            "content-type": "application/json",
            "openstack-api-version": "placement 1.39",
        },
    )
    with urllib.request.urlopen(req, timeout=30) as resp:
        resp.read()
        return resp.status, resp.headers


def new_provider(server: Server) -> str:
    uuid = str(uuidlib.uuid4())
    api(server, "POST", "/resource_providers", {"name": uuid, "uuid": uuid})
    return uuid


def position(server: Server) -> str:
    return str(api(server, "GET", "/resource_classes")[1]["berth-position"])
