"""The gunicorn master of ``berth serve``: its options, hooks and life cycle.

The life cycle. "serving ..." is logged once the port is bound
(``when_ready``); SIGTERM is logged, and gunicorn's graceful stop lets
in-flight requests finish for up to ``GRACEFUL_TIMEOUT`` seconds.

The world. With the candidate cache on, the master builds the app and
loads the world before forking (``preload_app``, ``berth.serve.preload``): the
workers share it copy-on-write and each opens its own connections after
the fork, so no database connection is ever shared between processes.
With ``[berth] candidate_cache = false`` each worker builds its own app.

The change feed's watch (``berth.serve.watch``) is one more process the
master forks beside the workers (:class:`FeedProcess`): started once the
API listens, started again when it dies, stopped with the master.

The address. ``--host``/``--port``, or ``--unix-socket``: a socket file
of mode 0660 (owner and group), for a proxy on the same host. Either may
serve TLS (``[berth] ssl_cert_file`` and ``ssl_key_file``,
``berth.conf.check.check_tls``).

systemd. Under ``Type=notify`` (``NOTIFY_SOCKET`` set) the master says
READY, RELOADING and STOPPING itself (``berth.serve.systemd``), and
gunicorn, which would say READY too early, never sees the variable.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import socket
import ssl
import stat
import time
from collections.abc import Callable
from typing import Any

from gunicorn import glogging
from gunicorn.app.base import BaseApplication
from gunicorn.arbiter import Arbiter
from gunicorn.config import KNOWN_SETTINGS
from oslo_config import cfg

from berth import conf as berth_conf

# The application's modules load once, in the master: forked workers inherit
# them and start serving at once (no database state is shared; each worker
# still builds its own engine and pool in load()).
from berth.api.app import HEADER_FIELDS, HEADER_LINE_LIMIT, create_app
from berth.conf import check
from berth.db import setup
from berth.db.engine import Database
from berth.serve import metrics, preload, watch
from berth.serve.edge import REQUEST_LINE_LIMIT
from berth.serve.memory import Recycler, tune_gc
from berth.serve.systemd import Notifier

LOG = logging.getLogger("berth.server")


class GunicornLogger(glogging.Logger):  # type: ignore[misc]
    """gunicorn's logger, writing through the root logger's handlers
    (oslo.log's) instead of its own, so its lines share their format and
    destination. Its access log stays off: Berth logs each request."""

    def setup(self, cfg: Any) -> None:
        # The level oslo.log gave it (default_log_levels), not gunicorn's.
        level = self.error_log.level
        super().setup(cfg)
        for log in (self.error_log, self.access_log):
            for handler in list(log.handlers):
                log.removeHandler(handler)
            log.propagate = True
        self.error_log.setLevel(level)


class _Gunicorn(BaseApplication):  # type: ignore[misc]
    def __init__(self, conf: cfg.ConfigOpts, options: dict[str, Any]) -> None:
        self.conf = conf
        self.options = options
        super().__init__()

    def load_config(self) -> None:
        for key, value in self.options.items():
            self.cfg.set(key, value)

    #: The change feed's process (``berth.serve.watch``), if any.
    feed: FeedProcess | None = None
    #: What the master tells systemd (inert outside a notify service).
    notifier = Notifier(None)

    def run(self) -> None:
        try:
            BerthArbiter(self).run()
        except RuntimeError as exc:
            raise SystemExit("berth: error: %s" % exc) from None

    def reload(self) -> None:
        # SIGHUP: a preloading master builds the app and loads the world
        # again before forking new workers, so they see what the change
        # sequence cannot tell (a write made outside Berth).
        super().reload()
        self.callable = None

    def load(self) -> Any:
        # The master prepared the database (run); workers only connect.
        app = create_app(
            self.conf, Database(setup.engine_from_conf(self.conf)), world_observers=[tune_gc()]
        )
        if self.cfg.preload_app:
            # In the master: every worker forks from this loaded world.
            preload.warm(app)
        return app


#: Seconds in-flight requests get to finish after SIGTERM.
GRACEFUL_TIMEOUT = 30


#: The mode of a unix socket ``berth serve`` makes: its user and group
#: may connect (a proxy in the group), nobody else.
UNIX_SOCKET_UMASK = 0o117


def gunicorn_options(conf: cfg.ConfigOpts, bind: str, workers: int) -> dict[str, Any]:
    """gunicorn settings for ``berth serve`` on ``bind`` (``host:port`` or
    ``unix:PATH``): ``[berth] worker_timeout``, and TLS when ``[berth]
    ssl_cert_file`` is set (checked by ``check.check_tls`` first)."""
    return {
        "bind": bind,
        "workers": workers,
        "worker_class": "berth.serve.edge.EdgeWorker",
        "timeout": conf.berth.worker_timeout,
        "umask": UNIX_SOCKET_UMASK,
        **_tls_options(conf),
        "graceful_timeout": GRACEFUL_TIMEOUT,
        "keepalive": 5,
        "limit_request_line": REQUEST_LINE_LIMIT,
        # gunicorn counts the line's CRLF; Berth's limit is the line itself.
        "limit_request_field_size": HEADER_LINE_LIMIT + 2,
        "limit_request_fields": HEADER_FIELDS,
        "accesslog": None,
        "errorlog": "-",
        "loglevel": "warning",
        "proc_name": "berth",
        "when_ready": _when_ready,
        "on_exit": _on_exit,
        **_without_control_socket(),
    }


def _tls_options(conf: cfg.ConfigOpts) -> dict[str, Any]:
    """gunicorn's TLS settings from ``[berth]``: none without a
    certificate; a client certificate required with ``ssl_ca_file``."""
    berth = conf.berth
    if not berth.ssl_cert_file:
        return {}
    options = {"certfile": berth.ssl_cert_file, "keyfile": berth.ssl_key_file}
    if berth.ssl_ca_file:
        options.update(ca_certs=berth.ssl_ca_file, cert_reqs=ssl.CERT_REQUIRED)
    return options


def _without_control_socket() -> dict[str, Any]:
    """gunicorn 25.1 and later open a control socket (``gunicornc``) by
    default, in ``$XDG_RUNTIME_DIR`` or else ``~/.gunicorn/`` (made if
    need be): one path for every server the user runs, removed by
    whichever stops first, and a management interface nobody asked for.
    Berth is managed by its signals (HUP, TERM, TTIN, TTOU). Earlier
    releases know no such setting: gunicorn's registry of settings, not
    its version, tells."""
    known = {setting.name for setting in KNOWN_SETTINGS}
    return {"control_socket_disable": True} if "control_socket_disable" in known else {}


def _when_ready(arbiter: Arbiter) -> None:
    addresses = ", ".join(str(listener) for listener in arbiter.LISTENERS)
    LOG.info("serving Placement API on %s with %d worker(s)", addresses, arbiter.num_workers)


def _on_exit(arbiter: Arbiter) -> None:
    LOG.info("stopped")


class BerthArbiter(Arbiter):  # type: ignore[misc]
    """gunicorn's master, saying when it was asked to stop, and telling
    systemd when it is ready, reloading and stopping."""

    def handle_term(self) -> None:
        LOG.info(
            "SIGTERM received: no new connections; in-flight requests get up to %ds to finish",
            self.cfg.graceful_timeout,
        )
        super().handle_term()

    def handle_hup(self) -> None:
        self.app.notifier.reloading()
        super().handle_hup()

    # The change feed's process lives and dies with the master: started
    # once the API listens, restarted from the arbiter's loop (which runs
    # at least every second) when it died, stopped before the workers.
    def start(self) -> None:
        os.register_at_fork(after_in_child=_stop_at_once)
        super().start()
        if self.app.feed is not None:
            self.app.feed.start(self)

    def manage_workers(self) -> None:
        super().manage_workers()
        if self.app.feed is not None:
            self.app.feed.check(self)
        self.app.notifier.check(
            list(self.WORKERS),
            self.num_workers,
            "serving Placement API on %s with %d worker(s)"
            % (", ".join(str(lnr) for lnr in self.LISTENERS), self.num_workers),
        )

    def stop(self, graceful: bool = True) -> None:
        self.app.notifier.stopping()
        if self.app.feed is not None:
            self.app.feed.stop()
        super().stop(graceful)


#: What the master sends a worker (or the feed's process) to stop it:
#: gracefully, at once, or from a terminal.
STOP_SIGNALS = (signal.SIGTERM, signal.SIGQUIT, signal.SIGINT)


def _stop_at_once() -> None:
    """In a process the master has just forked, until it sets handlers
    of its own (a worker in gunicorn's ``init_signals``, the feed in
    ``watch.serve``): a stop signal ends it at once, with status 0. A
    fork inherits the master's handlers, which only queue the signal for
    the master's loop; a SIGTERM that came while a worker was still
    booting was lost, and the master waited ``GRACEFUL_TIMEOUT`` seconds
    to kill it. Nothing is in flight before a worker's first request."""
    for sig in STOP_SIGNALS:
        signal.signal(sig, _exit_now)


def _exit_now(signum: int, frame: object) -> None:
    os._exit(0)


class FeedProcess:
    """The change feed's watch server (``berth.serve.watch``), forked
    from the master on a socket the master bound once (so a restart
    never loses the port)."""

    def __init__(self, conf: cfg.ConfigOpts, sock: socket.socket) -> None:
        self.conf, self.sock = conf, sock
        self.pid: int | None = None
        #: When it may start again: a process that keeps failing at once
        #: is restarted after 1, 2, 4 ... up to 30 seconds.
        self.delay, self.started, self.not_before = 0.0, 0.0, 0.0

    def start(self, arbiter: Arbiter) -> None:
        parent = os.getpid()
        self.started = time.monotonic()
        pid = os.fork()
        if pid == 0:  # the child: none of the arbiter's sockets or pipes
            status = 0
            try:
                for listener in arbiter.LISTENERS:
                    listener.close()
                watch.serve(self.conf, self.sock, parent)
            except BaseException:  # noqa: BLE001 - say why, then exit
                LOG.exception("the change feed's process failed")
                status = 1
            finally:
                os._exit(status)
        self.pid = pid

    def check(self, arbiter: Arbiter) -> None:
        """Start the process again when it died (the arbiter may have
        reaped it already)."""
        if self.pid is None:
            if time.monotonic() >= self.not_before:
                self.start(arbiter)
            return
        try:
            done, status = os.waitpid(self.pid, os.WNOHANG)
        except ChildProcessError:
            done, status = self.pid, -1
        if not done:
            return
        folder = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
        if folder:  # its live gauges (watchers) go with it
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(  # type: ignore[no-untyped-call]
                self.pid, folder
            )
        now = time.monotonic()
        self.delay = 0.0 if now - self.started > 60 else min(max(1.0, self.delay * 2), 30.0)
        LOG.warning(
            "the change feed's process (pid %d) exited (%s); starting it again in %.0f s",
            self.pid,
            "status %d" % status if status >= 0 else "reaped",
            self.delay,
        )
        self.pid, self.not_before = None, now + self.delay
        self.check(arbiter)

    def stop(self) -> None:
        pid, self.pid = self.pid, None
        self.not_before = float("inf")  # for good
        if pid is None:
            return
        try:
            os.kill(pid, signal.SIGTERM)
            for _ in range(50):
                if os.waitpid(pid, os.WNOHANG)[0]:
                    return
                time.sleep(0.1)
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
        except (ProcessLookupError, ChildProcessError):
            pass


def check_socket_free(path: str) -> None:
    """Exit with one line when no unix socket can be made at ``path``: a
    path too long, a folder missing or not writable, a file that is no
    socket, or a socket another server answers on (gunicorn would remove
    it from under that server). A socket nobody answers on is left for
    gunicorn to replace."""
    where = "berth: error: cannot listen on unix:%s: " % path
    folder = os.path.dirname(os.path.abspath(path))
    if len(os.fsencode(path)) > 107:  # sun_path, less its NUL
        raise SystemExit(where + "the path is longer than 107 bytes")
    if not os.path.isdir(folder):
        raise SystemExit(where + "no folder %s" % folder)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise SystemExit(where + "%s is not writable" % folder)
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise SystemExit(where + "a file that is not a socket is there")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(path)
        except OSError:
            return
    raise SystemExit(where + "another server listens there (is another berth serve running?)")


def check_port_free(host: str, port: int) -> None:
    """Exit with one line when ``host:port`` cannot be bound (in use,
    not this machine's address, a privileged port), before the world is
    loaded and before gunicorn would retry for seconds."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise SystemExit(
            "berth: error: cannot listen on %s:%d: %s" % (host, port, exc.strerror or exc)
        ) from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(address)
        except OSError as exc:
            hint = (
                " (is another berth serve running? choose another --port)"
                if exc.errno == errno.EADDRINUSE
                else ""
            )
            raise SystemExit(
                "berth: error: cannot listen on %s:%d: %s%s"
                % (host, port, exc.strerror or exc, hint)
            ) from None


def prepare_database(conf: cfg.ConfigOpts) -> None:
    """Wait for the database and prepare it (migrate if asked, seed),
    once, in the master process before any worker starts."""
    setup.announce(conf)
    engine = setup.engine_from_conf(conf)
    setup.prepare_from_conf(conf, engine, wait=True)
    engine.dispose()


def run(
    conf: cfg.ConfigOpts, host: str, port: int, workers: int | None, unix_socket: str | None = None
) -> int:
    """Serve until stopped, on ``host:port`` or else on ``unix_socket``;
    exit status. Refuses, with one line and before anything is loaded,
    an address it may not or cannot bind, TLS files it cannot use, and a
    Keystone setup with which no token could be validated
    (``ConfigProblem``, ``SystemExit``)."""
    # Before gunicorn could see it, whatever fails next.
    notifier = Notifier.from_environ()
    if berth_conf.is_embedded(conf):
        conf.set_override("auth_strategy", "noauth2", group="api")
    check.check_auth(conf)
    check.check_tls(conf)
    if unix_socket is not None:
        # Local, as loopback is: who connects is the file's mode
        # (UNIX_SOCKET_UMASK) and its folder's, so noauth2 may serve it.
        check_socket_free(unix_socket)
        bind = "unix:%s" % unix_socket
    else:
        check.check_bind(conf, host)
        check_port_free(host, port)
        bind = "%s:%d" % (host, port)
    address = watch.listen_address(conf)
    feed = None
    if address is not None:
        check.check_bind(conf, address[0])
        # Bound once, for every restart of the feed's process.
        feed = FeedProcess(conf, watch.listen_socket(*address))
    if berth_conf.is_embedded(conf):
        LOG.warning(
            "no configuration file: serving an embedded SQLite "
            "database in %s with noauth2. This mode is for local "
            "use only.",
            berth_conf.data_dir(conf),
        )
    prepare_database(conf)
    listen = conf.berth.metrics_listen
    if listen:
        check.parse_listen(listen, "metrics_listen")  # fail before forking
    with metrics.multiprocess_dir() as folder:
        return _serve(conf, bind, workers, metrics.gunicorn_hooks(listen, folder), feed, notifier)


def _post_fork(server: Any, worker: Any) -> None:
    app = getattr(server.app, "callable", None)
    if app is not None:  # preloaded: the app came with the fork
        # berth.serve.edge.EdgeWorker is a sync worker: one request at a time.
        preload.after_fork(app, one_at_a_time=True)


def _pre_fork(server: Any, worker: Any) -> None:
    app = getattr(server.app, "callable", None)
    if app is not None:
        preload.refresh(app)


def _both(first: Callable[..., Any], then: Callable[..., Any]) -> Callable[..., Any]:
    """One gunicorn hook of the arbiter (``when_ready``, ``on_exit``: one
    argument, as gunicorn checks) that calls ``first``, then ``then``."""

    def hook(server: Any) -> None:
        first(server)
        then(server)

    return hook


def _serve(
    conf: cfg.ConfigOpts,
    bind: str,
    workers: int | None,
    hooks: dict[str, Any],
    feed: FeedProcess | None = None,
    notifier: Notifier | None = None,
) -> int:
    if workers is None:
        workers = 1 if berth_conf.is_embedded(conf) else (os.cpu_count() or 1)
    options = gunicorn_options(conf, bind, workers)
    # gunicorn's lines go through oslo.log's handlers (berth.logs).
    options["logger_class"] = GunicornLogger
    for name, hook in hooks.items():
        options[name] = _both(options[name], hook) if name in options else hook
    # Load the world once in the master, shared copy-on-write by every
    # worker (berth.serve.preload); nothing to share without the cache.
    options["preload_app"] = conf.berth.candidate_cache
    options["post_fork"] = _post_fork
    if options["preload_app"]:
        # A worker replaced (for its memory, or after a crash) forks from
        # a master whose world is up to date (berth.serve.preload.refresh).
        options["pre_fork"] = _pre_fork
        limit = conf.berth.worker_private_memory
        if limit != 0:
            options["post_request"] = Recycler(limit)
    if notifier is not None and notifier.address is not None:
        # Each worker says it booted; the master then says READY=1.
        options["post_worker_init"] = notifier.booted
    server = _Gunicorn(conf, options)
    server.feed = feed
    if notifier is not None:
        server.notifier = notifier
    server.run()
    return 0
