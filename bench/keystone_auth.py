"""What Keystone token validation costs Berth, per request.

Starts a real Keystone (``support/keystone.py``; build its venv with
``.ci/keystone.sh``) and a memcached on free loopback ports, then serves
the same small database with one gunicorn worker four ways:

* ``noauth2``;
* keystone, validated tokens cached in memcached (``memcached_servers``);
* keystone, keystonemiddleware's in-process cache (the default);
* keystone, no cache (``token_cache_time = -1``): every request asks
  Keystone.

For each it sends the same light request (``GET
/resource_providers/{uuid}``) sequentially with the nova service user's
token and reports the CPU of the Berth server and of Keystone per request.

    .venv/bin/python bench/keystone_auth.py [--requests 1000]
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # support/

from support import keystone as harness  # noqa: E402
from support.processes import free_port  # noqa: E402
from support.servers import Server, process_cpu  # noqa: E402


def tree_cpu(pid: int) -> float:
    """User+system CPU seconds of ``pid`` and its children."""
    return process_cpu(  # field 4: ppid
        lambda entry, fields: entry == pid or int(fields[1]) == pid
    )


def auth_conf(ks: harness.Keystone, extra: str) -> str:
    lines = ["[api]", "auth_strategy = keystone", "[keystone_authtoken]"]
    lines += ["%s = %s" % kv for kv in harness.authtoken_conf(ks).items()]
    return "\n".join(lines) + "\n" + extra


def measure(
    server: Server, ks: harness.Keystone, token: str, rp: str, n: int
) -> tuple[float, float, float]:
    """(Berth CPU ms, Keystone CPU ms, wall ms) per request."""
    headers = {"x-auth-token": token, "openstack-api-version": "placement 1.39"}
    with httpx.Client(base_url=server.url, headers=headers) as http:
        for _ in range(50):  # warm up: imports, pools, the service token
            http.get("/resource_providers/" + rp).raise_for_status()
        assert ks.proc is not None
        berth0, ks0, t0 = server.cpu_seconds(), tree_cpu(ks.proc.pid), time.monotonic()
        for _ in range(n):
            http.get("/resource_providers/" + rp).raise_for_status()
        wall = time.monotonic() - t0
        berth = server.cpu_seconds() - berth0
        keystone = tree_cpu(ks.proc.pid) - ks0
    return berth * 1000 / n, keystone * 1000 / n, wall * 1000 / n


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=1000)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="berth-bench-ks-"))
    memcached_port = free_port()
    memcached = subprocess.Popen(
        [
            shutil.which("memcached") or "/usr/bin/memcached",
            "-l",
            "127.0.0.1",
            "-p",
            str(memcached_port),
            "-U",
            "0",
            "-u",
            "root",
        ]
    )
    ks = harness.Keystone.create(work / "keystone")
    try:
        harness.populate(ks, "http://127.0.0.1:1")
        token = ks.token("nova", project="service")
        db_url = "sqlite:///%s" % (work / "placement.sqlite")
        variants = {
            "noauth2": "[api]\nauth_strategy = noauth2\n",
            "keystone, memcached": auth_conf(
                ks, "memcached_servers = 127.0.0.1:%d\n" % memcached_port
            ),
            "keystone, in-process cache": auth_conf(ks, ""),
            "keystone, no cache": auth_conf(ks, "token_cache_time = -1\n"),
        }
        rp = ""
        print("| auth | Berth CPU ms/req | Keystone CPU ms/req | wall ms/req |")
        print("| --- | --- | --- | --- |")
        for name, conf in variants.items():
            with Server(
                "berth",
                work / name.replace(" ", "_").replace(",", ""),
                db_url=db_url,
                auth_conf=conf,
            ) as server:
                if not rp:
                    with httpx.Client(
                        base_url=server.url, headers={"x-auth-token": "admin"}
                    ) as http:
                        rp = (
                            http.post("/resource_providers", json={"name": "cn1"})
                            .headers["location"]
                            .rsplit("/", 1)[1]
                        )
                berth, keystone, wall = measure(
                    server, ks, token if name != "noauth2" else "admin", rp, args.requests
                )
            print("| %s | %.2f | %.2f | %.2f |" % (name, berth, keystone, wall))
    finally:
        ks.stop()
        memcached.terminate()
        memcached.wait()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
