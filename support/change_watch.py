"""The change feed's watch (``berth.serve.watch``) for the tests:
``FeedServer`` serves it in-process on a free port, on its own event loop
in a thread; ``Stream`` is one watch over HTTP, read frame by frame (each
is kept in ``OPEN`` until ``close_streams``, which a fixture calls after
every test); and the writes the watch tests make through the API."""

from __future__ import annotations

import asyncio
import http.client
import json
import threading
import time
import uuid as uuidlib
from typing import Any

from berth.db.engine import Database
from berth.serve import watch
from berth.serve.watch import feed as feed_mod
from support.app_client import Client
from support.processes import free_port


class FeedServer:
    """The watch server on its own event loop in a thread."""

    def __init__(self, conf: Any, db: Database) -> None:
        self.port = free_port()
        self.loop = asyncio.new_event_loop()
        sock = watch.listen_socket("127.0.0.1", self.port)
        started = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(self.loop)
            self.running = self.loop.run_until_complete(watch.open_server(conf, db, sock))
            started.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert started.wait(30)

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(watch.close_server(self.running), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


#: Every stream a test opened, closed after it (``_close_streams``).
OPEN: list[Stream] = []


class Stream:
    """One watch over HTTP, read frame by frame."""

    def __init__(
        self,
        port: int,
        query: str,
        token: str | None = "admin",
        headers: dict[str, str] | None = None,
    ) -> None:
        OPEN.append(self)
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        sent = {} if token is None else {"x-auth-token": token}
        self.conn.request("GET", watch.PATH + "?" + query, headers={**sent, **(headers or {})})
        self.resp = self.conn.getresponse()

    def line(self) -> bytes:
        data = self.resp.readline()
        assert data, "the stream ended"
        return data

    def frame(self) -> dict[str, Any]:
        """The next frame: a JSON line's object, or an SSE event's
        fields (``id``, ``event``, ``data`` parsed)."""
        if self.resp.getheader("content-type") != feed_mod.SSE:
            return json.loads(self.line())  # type: ignore[no-any-return]
        fields: dict[str, Any] = {}
        while text := self.line().decode().rstrip("\n"):
            name, _, value = text.partition(": ")
            fields[name] = json.loads(value) if name == "data" else value
        return fields

    def events(self, count: int) -> list[dict[str, Any]]:
        """The next ``count`` events, skipping bookmarks."""
        found: list[dict[str, Any]] = []
        while len(found) < count:
            got = self.frame()
            body = got.get("data", got)
            if "kind" in body:
                found.append(got)
        return found

    def close(self) -> None:
        self.resp.close()
        self.conn.close()


def close_streams() -> None:
    """Close every stream a test opened."""
    while OPEN:
        OPEN.pop().close()


def wait_for(check: Any, what: str) -> None:
    """Until ``check()`` holds (the feed's loop runs in another thread)."""
    deadline = time.monotonic() + 30
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def new_provider(client: Client, name: str, parent: str | None = None) -> str:
    uuid = str(uuidlib.uuid4())
    body: dict[str, Any] = {"name": name, "uuid": uuid}
    if parent:
        body["parent_provider_uuid"] = parent
    assert client.post("/resource_providers", json=body).status_code == 200
    return uuid


def set_traits(client: Client, uuid: str, traits: list[str]) -> None:
    gen = client.get("/resource_providers/%s" % uuid).json()["generation"]
    resp = client.put(
        "/resource_providers/%s/traits" % uuid,
        json={"traits": traits, "resource_provider_generation": gen},
    )
    assert resp.status_code == 200, resp.text


def allocate(client: Client, rp: str, consumer: str, project: str) -> None:
    gen = client.get("/resource_providers/%s" % rp).json()["generation"]
    client.put(
        "/resource_providers/%s/inventories" % rp,
        json={"resource_provider_generation": gen, "inventories": {"VCPU": {"total": 64}}},
    )
    resp = client.put(
        "/allocations/%s" % consumer,
        json={
            "allocations": {rp: {"resources": {"VCPU": 1}}},
            "project_id": project,
            "user_id": "u",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        },
    )
    assert resp.status_code == 204, resp.text


def many_claims(client: Client, rp: str, count: int) -> list[str]:
    consumers = [str(uuidlib.uuid4()) for _ in range(count)]
    assert (
        client.post(
            "/allocations",
            json={
                c: {
                    "allocations": {rp: {"resources": {"VCPU": 1}}},
                    "project_id": "p1",
                    "user_id": "u",
                    "consumer_generation": None,
                    "consumer_type": "INSTANCE",
                }
                for c in consumers
            },
        ).status_code
        == 204
    )
    return consumers


def big_provider(client: Client) -> str:
    rp = new_provider(client, "host")
    allocate(client, rp, str(uuidlib.uuid4()), "p1")
    gen = client.get("/resource_providers/%s" % rp).json()["generation"]
    assert (
        client.put(
            "/resource_providers/%s/inventories" % rp,
            json={"resource_provider_generation": gen, "inventories": {"VCPU": {"total": 100000}}},
        ).status_code
        == 200
    )
    return rp
