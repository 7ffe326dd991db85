"""Berth vs upstream Placement: the same deployment, the same queries, the
same run. Reports server CPU per request (CPU of the server's whole process
tree divided by requests served), median latency, and the Berth/upstream
ratio.

    .venv/bin/python bench/run.py                 # full run, 1,000 hosts
    .venv/bin/python bench/run.py --hosts 200 --repeat 5   # quick look
    .venv/bin/python bench/run.py --only berth    # no upstream

Upstream is taken from .upstream-venv (``pip install
openstack-placement==16.0.0 gunicorn`` there; ``--setup-upstream`` does it).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import socket
import statistics
import sys
import tempfile
import time
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

import httpx
import orjson

# bench/ for its sibling scripts, the repository root for support/.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import world as world_mod  # noqa: E402

from support.servers import ROOT, Server, ensure_upstream_venv  # noqa: E402

AGG = world_mod.uid("agg-3")
SHARE = world_mod.uid("share-1")
BASE = "resources=VCPU:1,MEMORY_MB:1024,DISK_GB:10"
QUERIES: dict[str, str] = {
    "simple": BASE,
    "traits": BASE + "&required=HW_CPU_X86_AVX2,!CUSTOM_FAST",
    "member_of": BASE + "&member_of=" + AGG,
    # Granular and nested, with the unnumbered DISK_GB served locally or,
    # on ten hosts, by a sharing pool.
    "nested": (
        "resources=DISK_GB:10"
        "&resources_CPU=VCPU:2,MEMORY_MB:2048&required_CPU=HW_NUMA_ROOT"
        "&resources_NIC=SRIOV_NET_VF:1&required_NIC=CUSTOM_PHYSNET_A"
        "&same_subtree=_CPU,_NIC&group_policy=isolate"
    ),
    "sharing": "resources=VCPU:1,DISK_GB:500&member_of=" + SHARE,
}
EXPLOSION = {
    "explosion_8": "&".join("resources%d=SRIOV_NET_VF:1" % i for i in range(1, 9)),
    "explosion_16": "&".join("resources%d=SRIOV_NET_VF:1" % i for i in range(1, 17)),
}
#: Cheap queries repeat until this much time has passed (or MAX_REPEAT).
MIN_SECONDS = 3.0
MAX_REPEAT = 2000
HEADERS = {
    "x-auth-token": "admin",
    "accept": "application/json",
    "openstack-api-version": "placement 1.39",
}


def _count(body: object) -> int:
    """Candidates in an allocation-candidates answer, else rows in the
    answer's first list (providers), else 1."""
    if isinstance(body, dict):
        if "allocation_requests" in body:
            return len(body["allocation_requests"])
        for value in body.values():
            if isinstance(value, list):
                return len(value)
    return 1


def measure(
    server: Server,
    query: str,
    repeat: int,
    timeout: float,
    path: str = "/allocation_candidates",
    max_seconds: float = 60.0,
) -> dict[str, float | int | str]:
    """GET ``path?query`` at least ``repeat`` times and for at least
    MIN_SECONDS (the kernel counts CPU in 10 ms ticks: cheap queries need
    many requests for a precise figure), but no more once ``max_seconds``
    have passed; server CPU and latency (median, 99th percentile) per
    request."""
    http = httpx.Client(base_url=server.url, headers=HEADERS, timeout=timeout)
    url = path + ("?" + query if query else "")
    latencies: list[float] = []
    # One unmeasured request first: steady state, not first-use caches.
    try:
        r = http.get(url)
    except httpx.TimeoutException:
        return {"error": "timeout after %ss" % timeout}
    if r.status_code != 200:
        return {"error": "%s %s" % (r.status_code, r.text[:200])}
    count = _count(r.json())
    cpu0 = server.cpu_seconds()
    began = time.perf_counter()
    while len(latencies) < repeat or (
        time.perf_counter() - began < MIN_SECONDS and len(latencies) < MAX_REPEAT
    ):
        if latencies and time.perf_counter() - began > max_seconds:
            break
        start = time.perf_counter()
        try:
            r = http.get(url)
        except httpx.TimeoutException:
            return {"error": "timeout after %ss" % timeout}
        latencies.append(time.perf_counter() - start)
        if r.status_code != 200:
            return {"error": "%s %s" % (r.status_code, r.text[:200])}
    cpu = (server.cpu_seconds() - cpu0) / len(latencies)
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {
        "cpu_ms": cpu * 1000,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": p99 * 1000,
        "candidates": count,
        "requests": len(latencies),
    }


def measure_after_write(
    server: Server, path: str, query: str, project: str, rounds: int, timeout: float
) -> dict[str, float | int | str]:
    """The first ``GET path?query`` after a write, ``rounds`` times: each
    round claims one VCPU for a new consumer of ``project`` (on the
    provider a ``limit=1`` candidate query offers), then times the GET.
    Only the GET's server CPU is counted, summed over the rounds (each a
    window of a few 10 ms ticks: many rounds make the mean precise)."""
    http = httpx.Client(base_url=server.url, headers=HEADERS, timeout=timeout)
    url = path + ("?" + query if query else "")
    r = http.get(url)
    if r.status_code != 200:
        return {"error": "%s %s" % (r.status_code, r.text[:200])}
    cpu = 0.0
    latencies: list[float] = []
    for _ in range(rounds):
        offer = http.get("/allocation_candidates?resources=VCPU:1&limit=1")
        if offer.status_code != 200 or not offer.json()["allocation_requests"]:
            return {"error": "no candidate to claim: %s" % offer.text[:200]}
        claim = {
            "allocations": offer.json()["allocation_requests"][0]["allocations"],
            "project_id": project,
            "user_id": world_mod.uid("user"),
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        }
        put = http.put("/allocations/%s" % uuid.uuid4(), json=claim)
        if put.status_code != 204:
            return {"error": "claim: %s %s" % (put.status_code, put.text[:200])}
        time.sleep(0.05)  # the worker's own work after the claim's answer
        cpu0 = server.cpu_seconds()
        start = time.perf_counter()
        r = http.get(url)
        latencies.append(time.perf_counter() - start)
        cpu += server.cpu_seconds() - cpu0
        if r.status_code != 200:
            return {"error": "%s %s" % (r.status_code, r.text[:200])}
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return {
        "cpu_ms": cpu / rounds * 1000,
        "p50_ms": statistics.median(latencies) * 1000,
        "p99_ms": p99 * 1000,
        "requests": rounds,
    }


def run_queries(
    kind: str, workdir: Path, args: argparse.Namespace
) -> dict[str, dict[str, float | int | str]]:
    results: dict[str, dict[str, float | int | str]] = {}
    with Server(kind, workdir / "main") as server:
        t0 = time.time()
        world_mod.build(server.url, hosts=args.hosts)
        print("  %s: built %d hosts in %.0fs" % (kind, args.hosts, time.time() - t0), flush=True)
        for name, query in QUERIES.items():
            for label, q in ((name, query), (name + "+limit50", query + "&limit=50")):
                results[label] = measure(server, q, args.repeat, args.timeout)
                print("  %s %-26s %s" % (kind, label, results[label]), flush=True)
        # Claims race through several workers, as in production.
        server.restart(args.claims_workers)
        results["claims"] = claims(server, args)
        print(
            "  %s claims (%d workers) %s" % (kind, args.claims_workers, results["claims"]),
            flush=True,
        )
    with Server(kind, workdir / "wide") as server:
        world_mod.build_explosion(server.url)
        for name, query in EXPLOSION.items():
            q = query + "&group_policy=none&limit=1000"
            results[name] = measure(server, q, max(1, args.repeat // 5), args.timeout)
            print("  %s %-26s %s" % (kind, name, results[name]), flush=True)
    return results


def _scheduler(
    url: str,
    n: int,
    count: int,
    seconds: float,
    ready: Any,
    results: Any,
    query: str = BASE + "&limit=5",
    first: bool = False,
) -> None:
    """One scheduler process: ``count`` claims (no new one after
    ``seconds``), each a candidates request (``query``, by default with
    ``limit=5``) and a PUT of one of them (the first with ``first``, as
    Nova does when its weighers tie), again on a 409. Puts its (claims,
    conflicts, errors, CPU seconds) on ``results``."""
    parsed = urllib.parse.urlsplit(url)
    conn = Wire(parsed.hostname or "127.0.0.1", parsed.port or 80)
    done = conflicts = errors = 0
    ready.wait()
    cpu0 = time.process_time()
    deadline = time.monotonic() + seconds
    for i in range(count):
        if time.monotonic() > deadline:
            break
        consumer = str(uuid.uuid4())
        owner = (world_mod.uid("p"), world_mod.uid("u"))
        for _attempt in range(10):
            status = claim_attempt(conn, query, consumer, owner, None if first else n + i)
            if status == 204:
                done += 1
                break
            if status == 409:
                conflicts += 1
                continue
            errors += status != 0
            break
    conn.close()
    results.put((done, conflicts, errors, time.process_time() - cpu0))


class Wire:
    """A scheduler's HTTP/1.1 connection, kept as light as a load
    generator's: each request one prebuilt head and one ``sendall``, the
    answer read by its ``Content-Length``, a new connection when the
    server closed the last (``berth serve`` and upstream's servers close
    after each answer). ``http.client`` parses every answer's headers with
    the ``email`` package; in the race the schedulers share the server's
    two cores, so what they spend is taken from it (``claim_cycle.py``
    reports their share apart)."""

    def __init__(self, host: str, port: int, timeout: float = 60.0) -> None:
        self.address = (host, port)
        self.timeout = timeout
        self.sock: socket.socket | None = None
        self.head = "".join(
            "%s: %s\r\n" % item
            for item in {
                **HEADERS,
                "host": "%s:%d" % (host, port),
                "content-type": "application/json",
            }.items()
        )

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    def call(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        """Status and body of one request; 599 when the connection failed.
        A request on a kept connection that the server had closed before
        answering anything is sent again once on a new one."""
        request = (
            "%s %s HTTP/1.1\r\n%scontent-length: %d\r\n\r\n" % (method, path, self.head, len(body))
        ).encode() + body
        for again in (True, False):
            kept = self.sock is not None
            try:
                if self.sock is None:
                    self.sock = socket.create_connection(self.address, self.timeout)
                    self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                self.sock.sendall(request)
                answer = self._answer(self.sock)
            except OSError:
                answer = None
            if answer is not None:
                return answer
            self.close()
            if not (again and kept):
                return 599, b""
        raise AssertionError("unreachable")

    def _answer(self, sock: socket.socket) -> tuple[int, bytes] | None:
        """The answer on ``sock``; None when it closed before any byte."""
        data = sock.recv(65536)
        if not data:
            return None
        while b"\r\n\r\n" not in data:
            more = sock.recv(65536)
            if not more:
                raise OSError("the server closed the connection mid-answer")
            data += more
        head, _, body = data.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").lower().split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        fields = dict(line.split(":", 1) for line in lines[1:] if ":" in line)
        length = int(fields.get("content-length", "0"))
        while len(body) < length:
            more = sock.recv(65536)
            if not more:
                raise OSError("the server closed the connection mid-answer")
            body += more
        if fields.get("connection", "").strip() == "close":
            self.close()
        return status, body[:length]


def claim_attempt(
    conn: Wire,
    query: str,
    consumer: str,
    owner: tuple[str, str],
    pick: int | None = None,
) -> int:
    """One attempt at a scheduler's claim for ``consumer`` (a project and
    user ``owner``): ``GET /allocation_candidates?<query>``, then a PUT of
    the first candidate (as Nova does when its weighers tie), or of the
    one at ``pick`` modulo their number. The PUT's status (204, 409...),
    the GET's when it failed, 0 when there was no candidate."""
    status, body = conn.call("GET", "/allocation_candidates?" + query)
    if status != 200:
        return status
    reqs = orjson.loads(body)["allocation_requests"]
    if not reqs:
        return 0
    chosen = reqs[0 if pick is None else pick % len(reqs)]
    status, _ = conn.call(
        "PUT",
        "/allocations/" + consumer,
        orjson.dumps(
            {
                "allocations": chosen["allocations"],
                "project_id": owner[0],
                "user_id": owner[1],
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            }
        ),
    )
    return status


def claims(server: Server, args: argparse.Namespace) -> dict[str, float | int | str]:
    """``args.clients`` schedulers racing to claim ``args.claims`` in all
    (none started after ``args.claims_seconds``, when given): claims per
    second, and the server's CPU per claim (its whole process group over
    the run, divided by the claims made). ``args.query`` and
    ``args.first``, when given, are the schedulers' candidates query and
    whether each takes the first candidate (see ``_scheduler``).

    Each scheduler is its own process with a plain connection
    (:class:`Wire`): 16 threads of one Python client share one GIL, and their
    turns for it, not the server, set the pace (the server sat idle a
    quarter of the time waiting for requests). The same client serves
    both implementations.

    ``args.probe``, when given, is called as the race starts and returns
    a callable called as it ends, which returns more CPU seconds spent
    meanwhile by name (``claim_cycle.py``'s split of the two cores); each
    is reported per claim as ``<name>_ms_per_claim``.
    """
    probe = getattr(args, "probe", None)
    ctx = multiprocessing.get_context("fork")
    ready = ctx.Barrier(args.clients + 1)
    results = ctx.Queue()
    seconds = getattr(args, "claims_seconds", None) or float("inf")
    procs = [
        ctx.Process(
            target=_scheduler,
            args=(
                server.url,
                n,
                args.claims // args.clients,
                seconds,
                ready,
                results,
                getattr(args, "query", BASE + "&limit=5"),
                getattr(args, "first", False),
            ),
        )
        for n in range(args.clients)
    ]
    for proc in procs:
        proc.start()
    ready.wait()
    finish = probe() if probe is not None else None
    cpu0 = server.cpu_seconds()
    start = time.perf_counter()
    totals = [results.get() for _ in procs]
    elapsed = time.perf_counter() - start
    cpu = server.cpu_seconds() - cpu0
    spent = finish() if finish is not None else {}
    for proc in procs:
        proc.join()
    done = sum(r[0] for r in totals)
    return {
        "claims_per_s": done / elapsed,
        "claims": done,
        "conflicts": sum(r[1] for r in totals),
        "errors": sum(r[2] for r in totals),
        "server_cpu_ms_per_claim": cpu * 1000 / max(done, 1),
        "client_cpu_ms_per_claim": (sum(r[3] for r in totals) * 1000 / max(done, 1)),
        "seconds": elapsed,
        **{
            "%s_ms_per_claim" % name: seconds * 1000 / max(done, 1)
            for name, seconds in spent.items()
        },
    }


def ratio(b: dict[str, float | int | str], u: dict[str, float | int | str], key: str) -> str:
    if key not in b or key not in u:
        return "-"
    return "%.1fx" % (float(u[key]) / max(float(b[key]), 1e-9))


def report(results: dict[str, dict[str, dict[str, float | int | str]]]) -> str:
    b, u = results.get("berth", {}), results.get("upstream", {})
    lines = [
        "%-26s %12s %12s %10s %12s %12s %10s"
        % (
            "query",
            "berth cpu ms",
            "upstr cpu ms",
            "cpu ratio",
            "berth p50",
            "upstr p50",
            "candidates",
        )
    ]
    for name in [k for k in b if k != "claims"] or [k for k in u if k != "claims"]:
        bb, uu = b.get(name, {}), u.get(name, {})
        lines.append(
            "%-26s %12s %12s %10s %12s %12s %10s"
            % (
                name,
                _fmt(bb, "cpu_ms"),
                _fmt(uu, "cpu_ms"),
                ratio(bb, uu, "cpu_ms"),
                _fmt(bb, "p50_ms"),
                _fmt(uu, "p50_ms"),
                "%s/%s" % (bb.get("candidates", "-"), uu.get("candidates", "-")),
            )
        )
    if "claims" in b or "claims" in u:
        bc, uc = b.get("claims", {}), u.get("claims", {})
        lines.append(
            "claims/s: berth %s, upstream %s (berth/upstream %s); "
            "5xx: berth %s, upstream %s"
            % (
                _fmt(bc, "claims_per_s"),
                _fmt(uc, "claims_per_s"),
                ratio(uc, bc, "claims_per_s"),
                bc.get("errors", "-"),
                uc.get("errors", "-"),
            )
        )
    return "\n".join(lines)


def _fmt(d: dict[str, float | int | str], key: str) -> str:
    if "error" in d:
        text = str(d["error"])
        return ">%ss" % text.split()[-1].rstrip("s") if "timeout" in text else text[:12]
    return "%.1f" % float(d[key]) if key in d else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--claims", type=int, default=200)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument(
        "--claims-workers", type=int, default=2, help="server workers during the claims race"
    )
    ap.add_argument("--only", choices=["berth", "upstream"])
    ap.add_argument(
        "--setup-upstream",
        action="store_true",
        help="create .upstream-venv with openstack-placement 16.0.0",
    )
    args = ap.parse_args()
    if args.setup_upstream or args.only != "berth":
        ensure_upstream_venv(force=args.setup_upstream)
    kinds = [args.only] if args.only else ["berth", "upstream"]
    results = {}
    with tempfile.TemporaryDirectory(prefix="berth-bench-") as tmp:
        for kind in kinds:
            print("running %s" % kind, flush=True)
            results[kind] = run_queries(kind, Path(tmp) / kind, args)
    text = report(results)
    print(text)
    out = ROOT / "bench" / "results"
    out.mkdir(exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    (out / ("%s.json" % stamp)).write_text(
        json.dumps({"args": vars(args), "results": results}, indent=2)
    )
    (out / ("%s.txt" % stamp)).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
