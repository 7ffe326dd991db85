"""Start and measure Berth and upstream Placement servers, for the
benchmarks and the import/export tests against upstream.

Both run under gunicorn (Berth's as ``berth serve``; as the uWSGI
deployment of ``deploy/uwsgi/berth.ini`` with the kind "berth-uwsgi") on a
fresh SQLite file (or a given database URL), each in its own process
group, so the CPU of the whole server process tree can be read from /proc
before and after a workload.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path

from support.processes import free_port

ROOT = Path(__file__).resolve().parent.parent
#: The uWSGI deployment's file, served as written but for its paths, port
#: and number of processes.
UWSGI_INI = ROOT / "deploy" / "uwsgi" / "berth.ini"
BERTH_VENV = Path(os.environ.get("BERTH_VENV", ROOT / ".venv"))
UPSTREAM_VENV = Path(os.environ.get("UPSTREAM_VENV", ROOT / ".upstream-venv"))
TICKS = os.sysconf("SC_CLK_TCK")
#: Upstream's release the benchmarks and the import tests compare with,
#: and the database drivers it needs (it declares none itself).
UPSTREAM_PACKAGES = ["openstack-placement==16.0.0", "gunicorn", "PyMySQL", "psycopg2-binary"]


def ensure_upstream_venv(force: bool = False) -> Path:
    """Create ``UPSTREAM_VENV`` with upstream Placement unless it is there."""
    ready = all((UPSTREAM_VENV / "bin" / exe).exists() for exe in ("gunicorn", "placement-manage"))
    if force or not ready:
        subprocess.run([sys.executable, "-m", "venv", str(UPSTREAM_VENV)], check=True)
        subprocess.run(
            [str(UPSTREAM_VENV / "bin/pip"), "install", "-q", *UPSTREAM_PACKAGES], check=True
        )
    return UPSTREAM_VENV


def render(source: Path, target: Path, replace: dict[str, str]) -> None:
    """``source`` written to ``target`` with each key replaced by its
    value; every key must occur, so the deploy file cannot drift away
    from what its user replaces."""
    text = source.read_text()
    for old, new in replace.items():
        assert old in text, "%s no longer holds %r" % (source, old)
        text = text.replace(old, new)
    target.write_text(text)


def process_cpu(wanted: Callable[[int, list[str]], bool]) -> float:
    """User+system CPU seconds of every live process for which
    ``wanted(pid, stat fields after the command name)`` holds, with that
    of the children each has waited for (a Berth worker replaced for its
    memory, [berth] worker_private_memory, counts in its master's)."""
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if wanted(int(entry), fields):
            # utime, stime, cutime, cstime
            total += sum(int(n) for n in fields[11:15])
    return total / TICKS


class Server:
    """One Placement server (``kind`` is "berth", "berth-uwsgi" or
    "upstream")."""

    def __init__(
        self,
        kind: str,
        workdir: Path,
        workers: int = 1,
        db_url: str | None = None,
        auth_conf: str | None = None,
        berth_options: dict[str, object] | None = None,
        sections: dict[str, dict[str, object]] | None = None,
    ) -> None:
        self.kind = kind
        # Configuration text replacing the noauth2 [api] section.
        self.auth_conf = auth_conf or "[api]\nauth_strategy = noauth2\n"
        self.dir = workdir / kind
        self.dir.mkdir(parents=True, exist_ok=True)
        self.workers = workers
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        self.db_url = db_url or "sqlite:///%s" % (self.dir / "placement.sqlite")
        #: more [berth] settings of a Berth server's placement.conf
        self.berth_options = berth_options or {}
        #: more settings of placement.conf, by section (``[berth]`` ones
        #: join ``berth_options``); either implementation reads them
        self.sections = sections or {}
        self.proc: subprocess.Popen[bytes] | None = None

    def _conf(self) -> Path:
        conf = self.dir / "placement.conf"
        sections: dict[str, dict[str, object]] = {
            "placement_database": {"connection": self.db_url},
            "oslo_policy": {"enforce_new_defaults": False},
            "berth": {"request_log": False, **self.berth_options},
        }
        for name, options in self.sections.items():
            sections[name] = {**sections.get(name, {}), **options}
        conf.write_text(
            "[DEFAULT]\ndebug = False\n"
            + self.auth_conf
            + "".join(
                "[%s]\n%s" % (name, "".join("%s = %s\n" % kv for kv in options.items()))
                for name, options in sections.items()
            )
        )
        return conf

    def start(self) -> Server:
        conf = self._conf()
        log = open(self.dir / "server.log", "wb")
        env = {**os.environ, "OS_PLACEMENT_CONFIG_DIR": str(self.dir)}
        if self.kind.startswith("berth"):
            subprocess.run(
                [str(BERTH_VENV / "bin/berth"), "db", "sync", "--config-file", str(conf)],
                check=True,
                stdout=subprocess.DEVNULL,
            )
        if self.kind == "berth-uwsgi":
            ini = self.dir / "berth-uwsgi.ini"
            render(
                UWSGI_INI,
                ini,
                {
                    "virtualenv = /opt/berth": "virtualenv = %s" % BERTH_VENV,
                    "=/etc/placement": "=%s" % self.dir,
                    "http-socket = :8778": "http-socket = 127.0.0.1:%d" % self.port,
                    "processes = 4": "processes = %d" % self.workers,
                },
            )
            cmd = [str(BERTH_VENV / "bin/uwsgi"), "--ini", str(ini)]
        elif self.kind == "berth":
            cmd = [
                str(BERTH_VENV / "bin/berth"),
                "serve",
                "--config-file",
                str(conf),
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--workers",
                str(self.workers),
            ]
        else:
            subprocess.run(
                [
                    str(UPSTREAM_VENV / "bin/placement-manage"),
                    "--config-file",
                    str(conf),
                    "db",
                    "sync",
                ],
                check=True,
                env=env,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            cmd = [
                str(UPSTREAM_VENV / "bin/gunicorn"),
                "-b",
                "127.0.0.1:%d" % self.port,
                "-w",
                str(self.workers),
                "--timeout",
                "900",
                "--log-level",
                "warning",
                "placement.wsgi.api:application",
            ]
        with log:  # the server process keeps its own copy
            self.proc = subprocess.Popen(
                cmd, stdout=log, stderr=log, env=env, start_new_session=True
            )
        deadline = time.time() + 60
        while time.time() < deadline:
            try:
                urllib.request.urlopen(self.url + "/", timeout=1).read()
                return self
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("%s server did not start; see %s" % (self.kind, self.dir / "server.log"))

    def cpu_seconds(self) -> float:
        """User+system CPU of every live process in the server's group."""
        assert self.proc is not None
        pgid = self.proc.pid
        return process_cpu(lambda pid, fields: int(fields[2]) == pgid)  # field 5: group

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            self.proc.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.proc.wait()
        self.proc = None

    def restart(self, workers: int) -> Server:
        """Serve the same database again with ``workers`` workers."""
        self.stop()
        self.workers = workers
        self.port = free_port()
        self.url = "http://127.0.0.1:%d" % self.port
        return self.start()

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
