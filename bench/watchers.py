"""Watchers of the change feed: delivery latency and what they cost.

    PYTHONPATH=src .venv/bin/python bench/watchers.py --watchers 1000 10000

Starts ``berth serve`` (2 API workers, its feed process on the next
port) over a fresh database (SQLite, or ``--db`` a PostgreSQL/MariaDB
URL of an empty database), then for each count of watchers:

1. writes ``--rate`` claims a second (``PUT /allocations/{new
   consumer}``, one event each) through the API for ``--seconds`` with
   no watcher open: the API workers' CPU per write;
2. opens that many watches (``after=now``, JSON lines) from
   ``--clients`` client processes (one event loop each, raw asyncio
   connections that only count lines) and waits until every one has its
   first bookmark;
3. writes the same load again while they follow it: each watcher counts
   the lines it gets; a sample of them (``--probes`` per client) parses
   each event and notes its delay from the event's commit time (its
   ``time``, the API's clock, here the same machine's) to its receipt.

It prints, per count: the delay's p50, p99 and max at the clients; the
feed's own delivery delay (p50, p99), from its histogram
``berth_feed_delivery_seconds`` (scraped from ``[berth] metrics_listen``
before and after the load, the buckets differenced, each quantile
interpolated linearly within its bucket as Prometheus's
``histogram_quantile`` does); the share of
(event, watcher) deliveries made; the feed process's RSS (with the
watches open) and CPU, and the client processes' CPU, during the load;
the API workers' CPU per write without and with the watchers, and the
writes a second achieved without and with them.
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import multiprocessing
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

# The repository root, for support/.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from support.processes import BERTH, free_port, stop_group  # noqa: E402
from support.servers import TICKS, process_cpu  # noqa: E402

HEADERS = {
    "x-auth-token": "admin",
    "content-type": "application/json",
    "openstack-api-version": "placement 1.39",
}


def api(port: int, method: str, path: str, body: Any = None) -> int:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request(method, path, None if body is None else json.dumps(body), HEADERS)
        resp = conn.getresponse()
        resp.read()
        return resp.status
    finally:
        conn.close()


class Serve:
    """``berth serve`` with its feed on the next port."""

    def __init__(self, workdir: Path, db_url: str | None) -> None:
        self.port = free_port()
        self.watch_port = free_port()
        self.metrics_port = free_port()
        conf = workdir / "placement.conf"
        conf.write_text(
            "[api]\nauth_strategy = noauth2\n"
            "[placement_database]\nconnection = %s\n"
            "[berth]\nrequest_log = False\nwatch_listen = 127.0.0.1:%d\n"
            "metrics_listen = 127.0.0.1:%d\n"
            % (
                db_url or "sqlite:///%s" % (workdir / "placement.sqlite"),
                self.watch_port,
                self.metrics_port,
            )
        )
        subprocess.run(
            [*BERTH, "db", "sync", "--config-file", str(conf)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        self.log = workdir / "serve.log"
        with self.log.open("wb") as sink:
            self.proc = subprocess.Popen(
                [
                    *BERTH,
                    "serve",
                    "--config-file",
                    str(conf),
                    "--port",
                    str(self.port),
                    "--workers",
                    "2",
                ],
                stdout=sink,
                stderr=sink,
                start_new_session=True,
            )
        deadline = time.monotonic() + 60
        while not (
            found := re.search(
                r"change feed's watch on \S+ \(pid "
                r"(\d+)\)",
                self.log.read_text(),
            )
        ):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise SystemExit("berth serve did not start:\n" + self.log.read_text())
            time.sleep(0.2)
        self.feed_pid = int(found.group(1))
        while api(self.port, "GET", "/") != 200:
            time.sleep(0.2)

    def api_cpu(self) -> float:
        """CPU seconds of the API workers (the master's children but
        the feed)."""
        return process_cpu(lambda pid, f: int(f[1]) == self.proc.pid and pid != self.feed_pid)

    def feed_cpu(self) -> float:
        with open("/proc/%d/stat" % self.feed_pid) as f:
            stat = f.read()
        fields = stat[stat.rindex(")") + 2 :].split()
        return sum(int(n) for n in fields[11:13]) / TICKS

    def delivery(self) -> dict[float, float]:
        """The feed's ``berth_feed_delivery_seconds`` buckets: how many
        observations were at most each bound (seconds; +Inf last)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.metrics_port, timeout=30)
        try:
            conn.request("GET", "/metrics")
            text = conn.getresponse().read().decode()
        finally:
            conn.close()
        found = re.findall(
            r'^berth_feed_delivery_seconds_bucket\{le="([^"]+)"'
            r"\} (\S+)$",
            text,
            re.MULTILINE,
        )
        return dict(sorted((float(le), float(n)) for le, n in found))

    def feed_rss_mb(self) -> float:
        with open("/proc/%d/status" % self.feed_pid) as f:
            kb = next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))
        return kb / 1024


def bucket_quantile(q: float, before: dict[float, float], after: dict[float, float]) -> float:
    """The ``q`` quantile (ms) of the observations made between two
    scrapes of a histogram, interpolated linearly within the bucket it
    falls in (the bound below it when it falls in +Inf's); NaN if none."""
    counts = [(le, after[le] - before.get(le, 0.0)) for le in after]
    if not counts or counts[-1][1] <= 0:
        return float("nan")
    rank, lower, below = q * counts[-1][1], 0.0, 0.0
    for le, cumulative in counts:
        if cumulative >= rank:
            if le == float("inf"):
                return lower * 1000
            inside = cumulative - below
            share = (rank - below) / inside if inside else 1.0
            return (lower + (le - lower) * share) * 1000
        lower, below = le, cumulative
    return lower * 1000


def write_load(port: int, provider: str, rate: float, seconds: float) -> int:
    """Claims at ``rate`` a second for ``seconds``; how many were made."""
    start, done = time.monotonic(), 0
    while (now := time.monotonic()) - start < seconds:
        due = start + done / rate
        if due > now:
            time.sleep(due - now)
        status = api(
            port,
            "PUT",
            "/allocations/%s" % uuid.uuid4(),
            {
                "allocations": {provider: {"resources": {"VCPU": 1}}},
                "project_id": "p",
                "user_id": "u",
                "consumer_generation": None,
                "consumer_type": "INSTANCE",
            },
        )
        assert status == 204, status
        done += 1
    return done


class Watch(asyncio.Protocol):
    """One watch over a raw connection (HTTP/1.1, chunked): it only
    counts the frames it gets (each JSON line ends ``}\\n``, which the
    chunks' framing never does) and, when it is a probe, parses the
    events' lines for their commit time. An aiohttp client per watcher
    cost more CPU than the feed serving it."""

    def __init__(self, request: bytes, probe: bool, tally: Tally) -> None:
        self.request, self.probe, self.tally = request, probe, tally
        self.head: bytes | None = b""  # None once the headers are read
        self.seen = False
        self.tail = b""  # a probe's partial line; a counter's last byte

    def connection_made(self, transport: Any) -> None:
        transport.write(self.request)

    def data_received(self, data: bytes) -> None:
        got = time.time()
        if self.head is not None:
            self.head += data
            if b"\r\n\r\n" not in self.head:
                return
            if not self.head.startswith(b"HTTP/1.1 200"):
                self.tally.failed = self.head[:200]
            data = self.head[self.head.index(b"\r\n\r\n") + 4 :]
            self.head = None
        before = self.tally.lines
        if not self.probe:
            self.tally.lines += data.count(b"}\n") + (self.tail == b"}" and data[:1] == b"\n")
            self.tail = data[-1:] or self.tail
        else:
            *whole, self.tail = (self.tail + data).split(b"\n")
            for line in whole:
                if line[:1] == b"{":
                    self.tally.lines += 1
                    if b'"time"' in line:
                        self.tally.delays.append(got - json.loads(line)["time"])
        if not self.seen and self.tally.lines > before:
            self.seen = True  # its first frame: the joining bookmark
            self.tally.ready += 1


class Tally:
    """What one client process's watches got."""

    def __init__(self) -> None:
        self.ready = self.lines = 0
        self.delays: list[float] = []
        self.failed: bytes | None = None


def client(port: int, count: int, probes: int, opened: Any, go: Any, stop: Any, out: Any) -> None:
    """One client process: ``count`` watches, ``probes`` of them timed."""

    async def main() -> None:
        loop = asyncio.get_running_loop()
        tally = Tally()
        request = (
            b"GET /berth/changes/watch?after=now HTTP/1.1\r\n"
            b"Host: 127.0.0.1:%d\r\nx-auth-token: admin\r\n\r\n" % port
        )
        transports = []
        for i in range(count):
            transport, _ = await loop.create_connection(
                lambda i=i: Watch(request, i < probes, tally), "127.0.0.1", port
            )
            transports.append(transport)
            while i + 1 - tally.ready > 200:  # a bounded backlog of joins
                await asyncio.sleep(0.01)
        while tally.ready < count:
            if tally.failed is not None:
                raise SystemExit("a watch was refused: %r" % tally.failed)
            await asyncio.sleep(0.1)
        await asyncio.sleep(0.5)  # the last joins' bookmarks
        opened.set()
        while not go.is_set():
            await asyncio.sleep(0.05)
        tally.lines = 0  # from here on: the load's events
        tally.delays.clear()
        cpu = time.process_time()
        while not stop.is_set():
            await asyncio.sleep(0.1)
        cpu = time.process_time() - cpu
        await asyncio.sleep(1.0)  # the last events in flight
        for transport in transports:
            transport.close()
        out.put((tally.lines, tally.delays, cpu))

    asyncio.run(main())


def note(text: str) -> None:
    print("# %s %s" % (time.strftime("%H:%M:%S"), text), file=sys.stderr, flush=True)


def run_count(serve: Serve, provider: str, count: int, args: argparse.Namespace) -> dict[str, Any]:
    note("%d watchers: the load alone" % count)
    cpu0 = serve.api_cpu()
    writes = write_load(serve.port, provider, args.rate, args.seconds)
    note("%d writes in %.0f s alone" % (writes, args.seconds))
    rate_alone = writes / args.seconds
    alone = (serve.api_cpu() - cpu0) / writes
    ctx = multiprocessing.get_context("fork")
    go, stop, out = ctx.Event(), ctx.Event(), ctx.Queue()
    opened = [ctx.Event() for _ in range(args.clients)]
    share = [count // args.clients + (i < count % args.clients) for i in range(args.clients)]
    procs = [
        ctx.Process(
            target=client, args=(serve.watch_port, n, min(args.probes, n), opened[i], go, stop, out)
        )
        for i, n in enumerate(share)
    ]
    note("opening the watches")
    started = time.monotonic()
    for proc in procs:
        proc.start()
    for event in opened:
        event.wait(600)
    open_seconds = time.monotonic() - started
    rss_open = serve.feed_rss_mb()
    cpu0, feed0 = serve.api_cpu(), serve.feed_cpu()
    note("the load with the watches")
    buckets = serve.delivery()
    go.set()
    time.sleep(0.5)
    spy = None
    if args.profile:  # sample the feed's process while it serves the load
        spy = subprocess.Popen(
            [
                args.py_spy,
                "record",
                "-p",
                str(serve.feed_pid),
                "-d",
                str(int(args.seconds)),
                "-f",
                "raw",
                "--nonblocking",
                "-o",
                "%s-%d.txt" % (args.profile, count),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    writes = write_load(serve.port, provider, args.rate, args.seconds)
    note(
        "%d writes in %.0f s with the watches (%.0f a second asked)"
        % (writes, args.seconds, args.rate)
    )
    api_with = (serve.api_cpu() - cpu0) / writes
    feed_cpu = (serve.feed_cpu() - feed0) / args.seconds
    stop.set()
    if spy is not None:
        spy.wait(60)
        profile_summary("%s-%d.txt" % (args.profile, count))
    results = [out.get(timeout=120) for _ in procs]
    for proc in procs:
        proc.join(30)
    after = serve.delivery()
    delays = sorted(d for _, ds, _ in results for d in ds)
    lines = sum(n for n, _, _ in results)
    clients_cpu = sum(c for _, _, c in results) / args.seconds

    def quantile(q: float) -> float:
        if not delays:
            return float("nan")
        return delays[min(len(delays) - 1, int(q * len(delays)))] * 1000

    return {
        "watchers": count,
        "open_s": open_seconds,
        "rate_alone": rate_alone,
        "rate_with": writes / args.seconds,
        "p50_ms": quantile(0.5),
        "p99_ms": quantile(0.99),
        "max_ms": delays[-1] * 1000 if delays else float("nan"),
        "feed_p50_ms": bucket_quantile(0.5, buckets, after),
        "feed_p99_ms": bucket_quantile(0.99, buckets, after),
        "samples": len(delays),
        # lines counted include bookmarks: at least every event
        "delivered": min(1.0, lines / (writes * count)),
        "feed_rss_mb": rss_open,
        "feed_cpu": feed_cpu,
        "clients_cpu": clients_cpu,
        "api_ms_alone": alone * 1000,
        "api_ms_with": api_with * 1000,
    }


def profile_summary(path: str, top: int = 15) -> None:
    """The functions the feed's process was found in most (py-spy's raw
    stacks), by own samples and with what they called."""
    own: dict[str, int] = {}
    within: dict[str, int] = {}
    total = 0
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip().rpartition(" ")
            frames = stack.split(";")
            n = int(count)
            total += n
            own[frames[-1]] = own.get(frames[-1], 0) + n
            for frame in set(frames):
                within[frame] = within.get(frame, 0) + n
    for title, table in (("own", own), ("with callees", within)):
        note("profile of the feed (%s), %d samples:" % (title, total))
        # What every sample holds (the loop, the start-up) says nothing.
        telling = {k: n for k, n in table.items() if n < 0.9 * total}
        for frame, n in sorted(telling.items(), key=lambda kv: -kv[1])[:top]:
            note("  %5.1f%%  %s" % (100 * n / total, frame))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--watchers", type=int, nargs="+", default=[1000])
    parser.add_argument("--rate", type=float, default=100.0)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--probes", type=int, default=50)
    parser.add_argument("--db", help="URL of an empty database")
    parser.add_argument(
        "--profile",
        metavar="PREFIX",
        help="sample the feed's process with py-spy during "
        "each load with watchers, into PREFIX-N.txt",
    )
    parser.add_argument("--py-spy", default="py-spy")
    args = parser.parse_args()
    # Stopped (timeout, Ctrl-C), still stop the server it started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    with tempfile.TemporaryDirectory(prefix="berth-watchers-") as tmp:
        serve = Serve(Path(tmp), args.db)
        try:
            provider = str(uuid.uuid4())
            api(serve.port, "POST", "/resource_providers", {"name": "host", "uuid": provider})
            api(
                serve.port,
                "PUT",
                "/resource_providers/%s/inventories" % provider,
                {"resource_provider_generation": 0, "inventories": {"VCPU": {"total": 10**9}}},
            )
            print(
                "| watchers | open (s) | clients p50 (ms) "
                "| clients p99 (ms) | max (ms) "
                "| feed p50 (ms) | feed p99 (ms) | delivered | feed RSS (MB) | feed CPU (cores) "
                "| clients CPU (cores) "
                "| API CPU/write alone (ms) | with watchers (ms) "
                "| writes/s alone / with |"
            )
            print("| --- " * 14 + "|")
            for count in args.watchers:
                r = run_count(serve, provider, count, args)
                print(
                    "| {watchers:,} | {open_s:.1f} | {p50_ms:.0f} | "
                    "{p99_ms:.0f} | {max_ms:.0f} | {feed_p50_ms:.0f} | "
                    "{feed_p99_ms:.0f} | {delivered:.1%} | "
                    "{feed_rss_mb:.0f} | {feed_cpu:.2f} | "
                    "{clients_cpu:.2f} | "
                    "{api_ms_alone:.2f} | {api_ms_with:.2f} | "
                    "{rate_alone:.0f} / {rate_with:.0f} |".format(**r),
                    flush=True,
                )
        finally:
            stop_group(serve.proc)


if __name__ == "__main__":
    main()
