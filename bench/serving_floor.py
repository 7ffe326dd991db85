"""The floor of the serving stack: server CPU per request of a bare WSGI
app and of Berth's ``GET /`` under several WSGI servers.

    .venv/bin/python -m pip install --target /tmp/srv waitress granian pyuwsgi
    .venv/bin/python bench/serving_floor.py --extra /tmp/srv

Each server runs one worker process (one thread where it has a choice)
in its own session; a client in this process sends ``--requests``
sequential requests after 100 unmeasured ones, either each on a new TCP
connection (``close``: what gunicorn's sync worker, Berth's default,
always does) or all on one kept-alive connection (``keep-alive``, where
the server keeps connections). The figure is the CPU (user + system) of
the server's whole process group, read from ``/proc``, divided by the
requests, in microseconds. Servers that are not importable are skipped.
"""

from __future__ import annotations

import argparse
import http.client
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# The repository root, for support/.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from support.processes import free_port, stop_group  # noqa: E402
from support.servers import process_cpu  # noqa: E402

BARE = """
BODY = b'{"versions": [{"id": "v1.0", "status": "CURRENT"}]}'
def application(environ, start_response):
    start_response("200 OK", [("Content-Type", "application/json"),
                              ("Content-Length", str(len(BODY)))])
    return [BODY]
"""

CONF = """[DEFAULT]
[api]
auth_strategy = noauth2
[placement_database]
connection = sqlite:///{db}
"""


def _cpu(pgid: int) -> float:
    """CPU seconds of every process in group ``pgid``."""
    return process_cpu(lambda pid, fields: int(fields[2]) == pgid)


def servers(app: str, port: int, bindir: Path | None) -> dict[str, list[str]]:
    """Command lines, one worker each."""
    py = sys.executable
    bind = "127.0.0.1:%d" % port
    found = {
        "gunicorn sync": [
            py,
            "-m",
            "gunicorn",
            "-w",
            "1",
            "-k",
            "sync",
            "-b",
            bind,
            "--log-level",
            "warning",
            app,
        ],
        "gunicorn gthread": [
            py,
            "-m",
            "gunicorn",
            "-w",
            "1",
            "-k",
            "gthread",
            "--threads",
            "1",
            "-b",
            bind,
            "--log-level",
            "warning",
            app,
        ],
        "waitress": [py, "-m", "waitress", "--threads=1", "--listen=%s" % bind, app],
        "granian": [
            py,
            "-m",
            "granian",
            "--interface",
            "wsgi",
            "--workers",
            "1",
            "--blocking-threads",
            "1",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--log-level",
            "warning",
            app,
        ],
    }
    uwsgi = shutil.which("uwsgi", path=str(bindir)) if bindir else None
    if uwsgi:
        module, _, name = app.partition(":")
        found["uwsgi"] = [
            py,
            uwsgi,
            "--http-socket",
            bind,
            "--module",
            module,
            "--callable",
            name,
            "--processes",
            "1",
            "--master",
            "--disable-logging",
            "--need-app",
        ]
    return found


def _wait(port: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> bool:
    end = time.time() + timeout
    while time.time() < end:
        if proc.poll() is not None:
            return False
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            conn.request("GET", "/")
            conn.getresponse().read()
            conn.close()
            return True
        except OSError:
            time.sleep(0.2)
    return False


def _requests(port: int, count: int, keep_alive: bool) -> None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    for _ in range(count):
        if not keep_alive:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        conn.request("GET", "/", headers={} if keep_alive else {"Connection": "close"})
        resp = conn.getresponse()
        resp.read()
        if resp.status != 200:
            raise RuntimeError(resp.status)
        if not keep_alive:
            conn.close()
        elif resp.will_close:
            raise RuntimeError("the server closed a kept-alive connection")
    conn.close()


def measure(cmd: list[str], port: int, env: dict[str, str], count: int) -> dict[str, float | None]:
    # The server's log goes to a file: a pipe nobody reads would fill
    # and block it.
    log = tempfile.TemporaryFile()
    proc = subprocess.Popen(cmd, env=env, start_new_session=True, stdout=log, stderr=log)
    try:
        if not _wait(port, proc):
            log.seek(0)
            raise RuntimeError("did not start: " + log.read().decode()[-300:])
        out: dict[str, float | None] = {}
        for mode, keep in (("close", False), ("keep-alive", True)):
            try:
                _requests(port, 100, keep)
                before = _cpu(proc.pid)
                _requests(port, count, keep)
                out[mode] = (_cpu(proc.pid) - before) / count * 1e6
            except (RuntimeError, OSError):
                out[mode] = None
        return out
    finally:
        stop_group(proc)
        log.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--extra", type=Path, help="a pip --target folder with more servers")
    args = ap.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="berth-floor-"))
    try:
        (folder / "bare_app.py").write_text(BARE)
        (folder / "placement.conf").write_text(CONF.format(db=folder / "p.sqlite"))
        root = Path(__file__).resolve().parent.parent
        path = [str(folder), str(root / "src")]
        if args.extra:
            path.append(str(args.extra))
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join(path + [os.environ.get("PYTHONPATH", "")]),
            "OS_PLACEMENT_CONFIG_DIR": str(folder),
        }
        subprocess.run(
            [
                sys.executable,
                "-m",
                "berth.cli",
                "db",
                "sync",
                "--config-file",
                str(folder / "placement.conf"),
            ],
            env=env,
            check=True,
            capture_output=True,
        )
        print("%-18s %-14s %10s %12s" % ("server", "app", "close us", "keep-alive us"))
        for app in ("bare_app:application", "berth.wsgi:application"):
            port = free_port()
            bindir = args.extra / "bin" if args.extra else None
            for name, cmd in servers(app, port, bindir).items():
                try:
                    got = measure(cmd, port, env, args.requests)
                except RuntimeError as exc:
                    print("%-18s %-14s %s" % (name, app.split(":")[0], str(exc)[:120]))
                    continue
                print(
                    "%-18s %-14s %10s %12s"
                    % (
                        name,
                        app.split(":")[0],
                        *(
                            "%.0f" % got[m] if got[m] is not None else "-"
                            for m in ("close", "keep-alive")
                        ),
                    ),
                    flush=True,
                )
    finally:
        shutil.rmtree(folder)
    return 0


if __name__ == "__main__":
    sys.exit(main())
