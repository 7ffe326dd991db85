"""The app in-process for the tests: ``make_conf`` (noauth2 and any
overrides), ``Client`` (httpx over the WSGI app, at a microversion), and
``Placement``, two workers over one SQLite file with the configuration
file the command line reads.
"""

from __future__ import annotations

import sqlite3
import time
import uuid as uuidlib
from pathlib import Path
from typing import Any

import httpx

from berth import conf as berth_conf
from berth.api.app import create_app
from berth.db import setup
from berth.db.engine import Database, create_engine


def make_conf(**overrides: Any) -> Any:
    """A ConfigOpts with noauth2 and any ``group__option=value`` overrides."""
    conf = berth_conf.load([])
    conf.set_override("auth_strategy", "noauth2", group="api")
    for key, value in overrides.items():
        group, _, name = key.partition("__")
        conf.set_override(name, value, group=group)
    return conf


class Client(httpx.Client):
    """httpx over the WSGI app in-process; ``version`` sets the
    microversion header for every request."""

    def __init__(self, app: Any, version: str | None = "latest", token: str = "admin") -> None:
        headers = {"x-auth-token": token, "accept": "application/json"}
        if version:
            headers["openstack-api-version"] = "placement %s" % version
        super().__init__(
            transport=httpx.WSGITransport(app=app),
            base_url="http://placement.test",
            headers=headers,
        )

    def at(self, version: str) -> Client:
        """A copy of this client pinned to another microversion."""
        other = Client.__new__(Client)
        httpx.Client.__init__(
            other,
            transport=self._transport,
            base_url=self.base_url,
            headers={**self.headers, "openstack-api-version": "placement %s" % version},
        )
        return other


RESTORE_CANDIDATES = {"resources": "VCPU:1"}


class Placement:
    """Two applications (two workers) over one SQLite database, and a
    configuration file naming it for the command line."""

    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path / "placement.sqlite"
        self.conf_file = tmp_path / "placement.conf"
        self.conf_file.write_text(
            "[api]\nauth_strategy = noauth2\n[placement_database]\n"
            "connection = sqlite:///%s\n" % self.path
        )
        engine = create_engine("sqlite:///%s" % self.path)
        setup.prepare(engine)
        self.db = Database(engine)
        self.workers = [Client(create_app(make_conf(), self.db)) for _ in range(2)]

    @property
    def args(self) -> list[str]:
        return ["--config-file", str(self.conf_file)]

    def position(self) -> str:
        # Past the half second a worker keeps the position it read.
        time.sleep(0.6)
        return str(self.workers[0].get("/").headers["berth-position"])

    def provider(self, name: str) -> str:
        uuid = str(uuidlib.uuid4())
        client = self.workers[0]
        assert (
            client.post("/resource_providers", json={"name": name, "uuid": uuid}).status_code == 200
        )
        assert (
            client.put(
                "/resource_providers/%s/inventories" % uuid,
                json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 8}}},
            ).status_code
            == 200
        )
        return uuid

    def candidates(self) -> list[set[str]]:
        """Each worker's candidate providers."""
        found = []
        for client in self.workers:
            resp = client.get("/allocation_candidates", params=RESTORE_CANDIDATES)
            assert resp.status_code == 200, resp.text
            found.append(set(resp.json()["provider_summaries"]))
        return found

    def copy(self, source: Path, target: Path) -> None:
        """SQLite's online backup, as docs/install.md gives it."""
        with sqlite3.connect(source) as src, sqlite3.connect(target) as dst:
            src.backup(dst)
