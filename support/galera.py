"""A three-node MariaDB Galera cluster on loopback, for tests, bench and CI.

Each node is a ``mariadbd`` of its own (datadir, socket, pid file and log
under ``BERTH_GALERA_DIR``, default ``/tmp/berth-galera``), started with
``--defaults-file`` so the system MariaDB's configuration and its server
on 3306 are left alone. Node 1 bootstraps the cluster
(``--wsrep-new-cluster``); nodes 2 and 3 join it by state transfer
(rsync).

Ports: SQL 23071-23073, group communication 24671-24673, incremental
state transfer 24681-24683, full state transfer 24691-24693: all below
Linux's ephemeral range (32768-60999), where any outgoing connection of
a test run may hold the port a node is about to listen on (a node failed
to start so in CI, "bind: Address already in use").

Use it as::

    python -m support.galera start   # or: stop, status

In tests, the ``galera_cluster`` fixture (tests/functional/fixtures_servers.py)
starts it (or reuses the one ``.ci/galera.sh`` started), and each test
has it alone (:func:`turn`).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pymysql

PROVIDER = "/usr/lib/galera/libgalera_smm.so"
BASE = Path(os.environ.get("BERTH_GALERA_DIR", "/tmp/berth-galera"))
SQL_PORTS = (23071, 23072, 23073)
GCOMM_PORTS = (24671, 24672, 24673)
IST_PORTS = (24681, 24682, 24683)
SST_PORTS = (24691, 24692, 24693)
CLUSTER = "berth_test"
#: Seconds a node may take to start and reach "Synced".
START_TIMEOUT = 120


@contextmanager
def turn() -> Iterator[None]:
    """Have the cluster alone while the block runs: an exclusive lock on
    a file beside ``BASE``, so that the tests of several pytest-xdist
    workers (``make stress``) use the one cluster in turn (one kills and
    restarts a node under load)."""
    BASE.parent.mkdir(parents=True, exist_ok=True)
    with open(BASE.parent / (BASE.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


class GaleraError(RuntimeError):
    """The cluster (or one node) could not be started or stopped."""


@dataclass(frozen=True)
class Node:
    """One node of the cluster; ``index`` counts from 0."""

    index: int

    @property
    def name(self) -> str:
        return "node%d" % (self.index + 1)

    @property
    def dir(self) -> Path:
        return BASE / self.name

    @property
    def port(self) -> int:
        return SQL_PORTS[self.index]

    @property
    def socket_path(self) -> Path:
        return self.dir / "mysqld.sock"

    @property
    def pid_file(self) -> Path:
        return self.dir / "mysqld.pid"

    @property
    def log(self) -> Path:
        return self.dir / "error.log"

    @property
    def cnf(self) -> Path:
        return self.dir / "my.cnf"

    def url(self, database: str = "") -> str:
        """A SQLAlchemy URL for ``database`` on this node, over TCP."""
        return "mysql+pymysql://root@127.0.0.1:%d/%s" % (self.port, database)

    def pid(self) -> int | None:
        """The running server's pid, or None."""
        try:
            pid = int(self.pid_file.read_text().strip())
            os.kill(pid, 0)
        except (OSError, ValueError):
            return None
        return pid

    def connect(self, timeout: int = 5) -> pymysql.connections.Connection:  # type: ignore[type-arg]
        """An admin connection over the node's unix socket."""
        return pymysql.connect(
            unix_socket=str(self.socket_path),
            user="root",
            connect_timeout=timeout,
            read_timeout=30,
            autocommit=True,
        )

    def listening(self) -> bool:
        """True when the server's socket accepts a connection (checked
        apart because PyMySQL leaks the socket of a refused connect)."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(2)
            try:
                sock.connect(str(self.socket_path))
            except OSError:
                return False
        return True

    def status(self, name: str) -> str | None:
        """A ``SHOW STATUS`` value, or None when the node does not answer."""
        if not self.listening():
            return None
        try:
            conn = self.connect(timeout=2)
        except pymysql.MySQLError:
            return None
        try:
            with conn.cursor() as cur:
                cur.execute("SHOW STATUS LIKE %s", (name,))
                row = cur.fetchone()
            return None if row is None else str(row[1])
        finally:
            conn.close()

    def synced(self) -> bool:
        return self.status("wsrep_local_state_comment") == "Synced"

    def write_config(self) -> None:
        gcomm = ",".join("127.0.0.1:%d" % p for p in GCOMM_PORTS)
        options = (
            "gmcast.listen_addr=tcp://127.0.0.1:%d;"
            "ist.recv_addr=127.0.0.1:%d;gcache.size=128M;"
            "evs.suspect_timeout=PT3S;evs.inactive_timeout=PT6S;"
            "pc.wait_prim_timeout=PT30S" % (GCOMM_PORTS[self.index], IST_PORTS[self.index])
        )
        lines = [
            "[mariadbd]",
            "datadir=%s" % (self.dir / "data"),
            "socket=%s" % self.socket_path,
            "pid-file=%s" % self.pid_file,
            "log-error=%s" % self.log,
            "port=%d" % self.port,
            "bind-address=127.0.0.1",
            "skip-name-resolve",
            "innodb_buffer_pool_size=64M",
            "innodb_log_file_size=48M",
            # Durability comes from the other nodes (as in production
            # Galera set-ups); the tests' machine is shared and slow.
            "innodb_flush_log_at_trx_commit=2",
            "max_connections=300",
            "performance_schema=OFF",
            "binlog_format=ROW",
            "default_storage_engine=InnoDB",
            "innodb_autoinc_lock_mode=2",
            "wsrep_on=ON",
            "wsrep_provider=%s" % PROVIDER,
            "wsrep_cluster_name=%s" % CLUSTER,
            "wsrep_cluster_address=gcomm://%s" % gcomm,
            "wsrep_node_name=%s" % self.name,
            "wsrep_node_address=127.0.0.1:%d" % GCOMM_PORTS[self.index],
            "wsrep_node_incoming_address=127.0.0.1:%d" % self.port,
            "wsrep_sst_method=rsync",
            "wsrep_sst_receive_address=127.0.0.1:%d" % SST_PORTS[self.index],
            'wsrep_provider_options="%s"' % options,
            "wsrep_slave_threads=2",
        ]
        if os.geteuid() == 0:
            # Not root: the rsync daemon that receives a state transfer
            # drops root for "nobody", which could not write the datadir.
            lines.append("user=mysql")
        self.cnf.write_text("\n".join(lines) + "\n")

    def install(self) -> None:
        """A fresh datadir (only for a node that has none)."""
        self.dir.mkdir(parents=True, exist_ok=True)
        self.write_config()
        if os.geteuid() == 0:
            shutil.chown(self.dir.parent, "mysql", "mysql")
            shutil.chown(self.dir, "mysql", "mysql")
        if (self.dir / "data" / "mysql").is_dir():
            return
        cmd = [
            "mariadb-install-db",
            "--defaults-file=%s" % self.cnf,
            "--auth-root-authentication-method=normal",
            "--skip-test-db",
            "--wsrep-on=OFF",
        ]
        if os.geteuid() == 0:
            cmd.append("--user=mysql")
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
        if done.returncode != 0:
            raise GaleraError(
                "mariadb-install-db for %s failed: %s" % (self.name, done.stderr[-2000:])
            )

    def recovered_position(self) -> str | None:
        """After a crash, the last committed ``uuid:seqno`` recorded in
        InnoDB, so that the node can rejoin by IST instead of a full SST."""
        done = subprocess.run(
            [
                "mariadbd",
                "--defaults-file=%s" % self.cnf,
                "--wsrep-recover",
                "--log-error=%s" % (self.dir / "recover.log"),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if done.returncode != 0:
            return None
        for line in (self.dir / "recover.log").read_text().splitlines():
            if "Recovered position:" in line:
                return line.rsplit("Recovered position:", 1)[1].strip()
        return None

    def start(self, bootstrap: bool = False) -> None:
        """Start the server and wait until it is Synced."""
        if self.pid() is not None and self.synced():
            return
        self.install()
        cmd = ["mariadbd", "--defaults-file=%s" % self.cnf]
        if bootstrap:
            cmd.append("--wsrep-new-cluster")
        grastate = self.dir / "data" / "grastate.dat"
        if grastate.exists() and "seqno:   -1" in grastate.read_text():
            position = self.recovered_position()
            if position:
                cmd.append("--wsrep-start-position=%s" % position)
        # Through a shell that exits at once: the server outlives whoever
        # started it (the CLI, or a test session that found no cluster).
        with open(self.dir / "stdout.log", "ab") as out:
            subprocess.run(
                ["sh", "-c", '"$@" & exit 0', "sh", *cmd],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                check=True,
                timeout=30,
            )
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.synced():
                return
            time.sleep(0.5)
        raise GaleraError(
            "%s did not reach Synced in %ss; see %s" % (self.name, START_TIMEOUT, self.log)
        )

    def kill(self) -> None:
        """SIGKILL the server, as a crash would, and wait for it to go."""
        pid = self.pid()
        if pid is None:
            return
        os.kill(pid, signal.SIGKILL)
        _wait_gone(pid, 30)

    def stop(self) -> None:
        """A clean shutdown (SIGTERM), killed if it takes too long."""
        pid = self.pid()
        if pid is None:
            return
        os.kill(pid, signal.SIGTERM)
        try:
            _wait_gone(pid, 60)
        except GaleraError:
            os.kill(pid, signal.SIGKILL)
            _wait_gone(pid, 30)


def _wait_gone(pid: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except OSError:
            return
        time.sleep(0.2)
    raise GaleraError("process %d did not exit" % pid)


NODES = tuple(Node(i) for i in range(len(SQL_PORTS)))


class Cluster:
    """The three nodes together."""

    nodes = NODES

    def running(self) -> bool:
        """True when every node answers and is Synced in a full cluster."""
        return all(n.synced() for n in self.nodes) and self.nodes[0].status(
            "wsrep_cluster_size"
        ) == str(len(self.nodes))

    def start(self) -> None:
        """Start (or complete) the cluster; node 1 bootstraps it when no
        node is up."""
        if shutil.which("mariadbd") is None or not Path(PROVIDER).exists():
            raise GaleraError(
                "mariadbd or %s missing (apt-get install mariadb-server galera-4 rsync)" % PROVIDER
            )
        if self.running():
            return
        anyone_up = any(n.synced() for n in self.nodes)
        for i, node in enumerate(self.nodes):
            if not anyone_up and i == 0:
                _mark_safe_to_bootstrap(node)
            node.start(bootstrap=not anyone_up and i == 0)
            if not anyone_up:
                _grant_tcp_root(node)
            anyone_up = True

    def stop(self) -> None:
        """Stop every node (the last one down can bootstrap next time)."""
        for node in reversed(self.nodes):
            node.stop()

    def create_database(self, name: str) -> None:
        conn = self.nodes[0].connect()
        try:
            with conn.cursor() as cur:
                cur.execute("CREATE DATABASE `%s` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin" % name)
        finally:
            conn.close()

    def drop_database(self, name: str) -> None:
        for node in self.nodes:
            try:
                conn = node.connect()
            except pymysql.MySQLError:
                continue
            try:
                with conn.cursor() as cur:
                    cur.execute("DROP DATABASE IF EXISTS `%s`" % name)
                return
            finally:
                conn.close()


def _grant_tcp_root(node: Node) -> None:
    """root@127.0.0.1 without password, as the tests' other servers allow
    (the grant replicates, and joiners copy it by state transfer)."""
    conn = node.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("CREATE USER IF NOT EXISTS 'root'@'127.0.0.1'")
            cur.execute("GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION")
    finally:
        conn.close()


def _mark_safe_to_bootstrap(node: Node) -> None:
    """After every node went down, let node 1 bootstrap again."""
    grastate = node.dir / "data" / "grastate.dat"
    if grastate.exists():
        text = grastate.read_text().replace("safe_to_bootstrap: 0", "safe_to_bootstrap: 1")
        grastate.write_text(text)


def main(argv: list[str]) -> int:
    usage = "usage: python -m support.galera start|stop|status"
    if len(argv) != 1 or argv[0] not in ("start", "stop", "status"):
        print(usage, file=sys.stderr)
        return 2
    cluster = Cluster()
    if argv[0] == "start":
        cluster.start()
        print("galera: 3 nodes Synced on ports %s" % (SQL_PORTS,))
    elif argv[0] == "stop":
        cluster.stop()
        print("galera: stopped")
    else:
        for node in cluster.nodes:
            print(
                "%s port %d pid %s state %s"
                % (node.name, node.port, node.pid(), node.status("wsrep_local_state_comment"))
            )
        return 0 if cluster.running() else 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
