"""A real Keystone for the tests: PyPI's ``keystone`` under gunicorn.

Keystone runs from its own venv (``$BERTH_KEYSTONE_VENV``, default
``<repo>/.keystone-venv``; ``.ci/keystone.sh`` builds it) on SQLite with
fernet tokens, on a free loopback port. The first start in a checkout runs
``keystone-manage db_sync`` and ``bootstrap`` once into a template kept in
the venv, so later sessions only copy it and start gunicorn.

The template also holds, created through Keystone's API as deployment
tools do, the people the tests need (:data:`PERSONAS`); :func:`populate` adds
the ``placement`` service with its catalog endpoint at each start.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from support.processes import free_port

REPO = Path(__file__).resolve().parents[1]
VENV = Path(os.environ.get("BERTH_KEYSTONE_VENV", REPO / ".keystone-venv")).resolve()
ADMIN_PASSWORD = "admin-secret"
PASSWORD = "secret"
DOMAIN = "Default"
REGION = "RegionOne"

#: name -> (project, roles on it) or ("system", roles). Keystone's implied
#: roles do the rest: admin implies manager, member and reader.
PERSONAS: dict[str, tuple[str, list[str]]] = {
    "placement": ("service", ["service"]),
    "nova": ("service", ["service"]),
    "alice": ("tenant-a", ["member"]),  # member of tenant-a
    "abby": ("tenant-a", ["reader"]),  # reader of tenant-a
    "bob": ("tenant-b", ["member"]),
    "bert": ("tenant-b", ["reader"]),
    "sysreader": ("system", ["reader"]),
    "norole": ("", []),
}
PROJECTS = ["service", "tenant-a", "tenant-b"]


class KeystoneUnavailable(RuntimeError):
    """The keystone venv is missing or Keystone did not start."""


def _conf_text(root: Path, expiration: int, keys: Path) -> str:
    return "\n".join(
        [
            "[DEFAULT]",
            "use_stderr = true",
            "[database]",
            "connection = sqlite:///%s" % (root / "keystone.db"),
            "[token]",
            "provider = fernet",
            "expiration = %d" % expiration,
            "[fernet_tokens]",
            "key_repository = %s" % (keys / "fernet"),
            "[fernet_receipts]",
            "key_repository = %s" % (keys / "receipts"),
            "[credential]",
            "key_repository = %s" % (keys / "credential"),
            # Keystone's own in-process cache: without it each request that
            # carries a token costs it a few hundred milliseconds.
            "[cache]",
            "enabled = true",
            "backend = dogpile.cache.memory",
            # Cheap password hashing: these passwords protect nothing.
            "[identity]",
            "password_hash_rounds = 4",
            "",
        ]
    )


def _manage(conf: Path, *args: str) -> None:
    proc = subprocess.run(
        [str(VENV / "bin" / "keystone-manage"), "--config-file", str(conf), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if proc.returncode:
        raise KeystoneUnavailable("keystone-manage %s failed:\n%s" % (args[0], proc.stderr[-3000:]))


def _keys(conf: Path) -> None:
    user = ["--keystone-user", str(os.getuid()), "--keystone-group", str(os.getgid())]
    _manage(conf, "fernet_setup", *user)
    _manage(conf, "credential_setup", *user)


def _new_fernet_keys(root: Path) -> None:
    """Fresh token and receipt key repositories, as ``keystone-manage
    fernet_setup`` makes them (a staged key 0 and a primary key 1), without
    paying for its start-up."""
    for sub in ("fernet", "receipts"):
        repo = root / sub
        repo.mkdir(parents=True, exist_ok=True)
        for name in ("0", "1"):
            (repo / name).write_bytes(base64.urlsafe_b64encode(os.urandom(32)))
            (repo / name).chmod(0o600)
        repo.chmod(0o700)


def _template() -> Path:
    """A migrated, bootstrapped database and keys, made once per venv."""
    template = VENV / "berth-template"
    if (template / "done").exists():
        return template
    shutil.rmtree(template, ignore_errors=True)
    template.mkdir(parents=True)
    conf = template / "keystone.conf"
    conf.write_text(_conf_text(template, 3600, template))
    _manage(conf, "db_sync")
    _keys(conf)
    # The identity endpoint's URL is fixed up to the real port at start.
    _manage(
        conf,
        "bootstrap",
        "--bootstrap-password",
        ADMIN_PASSWORD,
        "--bootstrap-region-id",
        REGION,
        "--bootstrap-public-url",
        "http://127.0.0.1:1/v3",
        "--bootstrap-internal-url",
        "http://127.0.0.1:1/v3",
        "--bootstrap-admin-url",
        "http://127.0.0.1:1/v3",
    )
    ks = Keystone(root=template, port=free_port())
    ks.start()
    try:
        _people(ks)
    finally:
        ks.stop()
    (template / "done").write_text("ok\n")
    return template


@dataclass
class Keystone:
    """One running Keystone; ``url`` is its ``/v3`` root's parent."""

    root: Path
    port: int
    expiration: int = 3600
    proc: subprocess.Popen[bytes] | None = None
    ids: dict[str, str] = field(default_factory=dict)
    # One client for every call: building one loads the CA bundle, which
    # costs more than the request.
    http: httpx.Client = field(default_factory=lambda: httpx.Client(timeout=30))

    @property
    def url(self) -> str:
        return "http://127.0.0.1:%d" % self.port

    @classmethod
    def create(
        cls,
        root: Path,
        *,
        expiration: int = 3600,
        share_with: Keystone | None = None,
        new_keys: bool = False,
    ) -> Keystone:
        """A Keystone in ``root``: a fresh copy of the template (with
        ``new_keys``, new fernet keys: same users, projects and ids, but
        another issuer), or one on ``share_with``'s database and keys."""
        if not (VENV / "bin" / "keystone-manage").exists():
            raise KeystoneUnavailable(
                "no keystone venv at %s: make test builds it (or run: bash "
                ".ci/keystone.sh --venv-only)" % VENV
            )
        root.mkdir(parents=True, exist_ok=True)
        db_root = keys = root
        if share_with is None:
            template = _template()
            shutil.copy(template / "keystone.db", root / "keystone.db")
            for sub in ("fernet", "receipts", "credential"):
                if (template / sub).exists():
                    shutil.copytree(template / sub, root / sub)
            if new_keys:
                for sub in ("fernet", "receipts"):
                    shutil.rmtree(root / sub)
                _new_fernet_keys(root)
        else:
            db_root = keys = share_with.root
        (root / "keystone.conf").write_text(_conf_text(db_root, expiration, keys))
        ks = cls(root=root, port=free_port(), expiration=expiration)
        ks.start()
        return ks

    def start(self) -> None:
        if self.http.is_closed:
            self.http = httpx.Client(timeout=30)
        env = dict(os.environ, OS_KEYSTONE_CONFIG_FILES=str(self.root / "keystone.conf"))
        # Keystone reads sys.argv as its own options, so gunicorn gets its
        # settings from ./gunicorn.conf.py (read by default) and no args.
        (self.root / "gunicorn.conf.py").write_text(
            "bind = '127.0.0.1:%d'\nworkers = 1\nthreads = 4\n"
            "worker_class = 'gthread'\ntimeout = 60\n"
            "wsgi_app = 'keystone.wsgi.api:application'\n" % self.port
        )
        with open(self.root / "gunicorn.log", "ab") as log:
            self.proc = subprocess.Popen(
                [str(VENV / "bin" / "gunicorn")], env=env, stdout=log, stderr=log, cwd=self.root
            )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise KeystoneUnavailable(
                    "keystone exited:\n%s" % (self.root / "gunicorn.log").read_text()[-3000:]
                )
            try:
                if self.http.get(self.url + "/v3").status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        self.stop()
        raise KeystoneUnavailable("keystone did not answer on %s" % self.url)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)  # gunicorn's quick stop
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None
        self.http.close()

    # -- the API -----------------------------------------------------------

    def token(
        self,
        user: str,
        password: str = PASSWORD,
        *,
        project: str | None = None,
        system: bool = False,
    ) -> str:
        """A token for ``user``: project-scoped, system-scoped or (with
        neither) unscoped."""
        auth: dict[str, Any] = {
            "identity": {
                "methods": ["password"],
                "password": {
                    "user": {"name": user, "domain": {"name": DOMAIN}, "password": password}
                },
            }
        }
        if project:
            auth["scope"] = {"project": {"name": project, "domain": {"name": DOMAIN}}}
        elif system:
            auth["scope"] = {"system": {"all": True}}
        r = self.http.post(self.url + "/v3/auth/tokens", json={"auth": auth})
        if r.status_code != 201:
            raise AssertionError("token for %s: %s %s" % (user, r.status_code, r.text))
        return r.headers["x-subject-token"]

    def admin_token(self) -> str:
        return self.token("admin", ADMIN_PASSWORD, project="admin")

    def api(self, method: str, path: str, token: str | None = None, **kw: Any) -> httpx.Response:
        headers = {"x-auth-token": token or self.admin_token()}
        headers.update(kw.pop("headers", {}))
        r = self.http.request(method, self.url + path, headers=headers, **kw)
        if r.status_code >= 400:
            raise AssertionError("%s %s: %s %s" % (method, path, r.status_code, r.text))
        return r

    def revoke(self, token: str) -> None:
        self.api("DELETE", "/v3/auth/tokens", headers={"x-subject-token": token})


def _create(ks: Keystone, tok: str, kind: str, body: dict[str, Any]) -> str:
    r = ks.api("POST", "/v3/%ss" % kind, tok, json={kind: body})
    return str(r.json()[kind]["id"])


def _people(ks: Keystone) -> None:
    """Projects, users and role grants (:data:`PERSONAS`), made through
    the API once, into the template."""
    tok = ks.admin_token()
    roles = {r["name"]: r["id"] for r in ks.api("GET", "/v3/roles", tok).json()["roles"]}
    domain = ks.api("GET", "/v3/domains?name=%s" % DOMAIN, tok).json()["domains"][0]["id"]
    projects = {
        name: _create(ks, tok, "project", {"name": name, "domain_id": domain}) for name in PROJECTS
    }
    for name, (where, grants) in PERSONAS.items():
        uid = _create(ks, tok, "user", {"name": name, "password": PASSWORD, "domain_id": domain})
        for role in grants:
            if where == "system":
                path = "/v3/system/users/%s/roles/%s" % (uid, roles[role])
            else:
                path = "/v3/projects/%s/users/%s/roles/%s" % (projects[where], uid, roles[role])
            ks.api("PUT", path, tok)


def populate(ks: Keystone, placement_url: str | None) -> None:
    """Point the catalog at this Keystone and (unless None) at
    ``placement_url``, and fill ``ks.ids`` with ``project:<name>``, ``user:<name>`` and
    ``role:<name>`` ids."""
    tok = ks.admin_token()
    for ep in ks.api("GET", "/v3/endpoints", tok).json()["endpoints"]:
        ks.api(
            "PATCH", "/v3/endpoints/%s" % ep["id"], tok, json={"endpoint": {"url": ks.url + "/v3"}}
        )
    for kind in ("role", "project", "user"):
        for row in ks.api("GET", "/v3/%ss" % kind, tok).json()[kind + "s"]:
            ks.ids["%s:%s" % (kind, row["name"])] = row["id"]
    if placement_url is None:
        return
    service = _create(ks, tok, "service", {"type": "placement", "name": "placement"})
    for interface in ("public", "internal"):
        _create(
            ks,
            tok,
            "endpoint",
            {
                "service_id": service,
                "interface": interface,
                "url": placement_url,
                "region_id": REGION,
            },
        )


def authtoken_conf(ks: Keystone) -> dict[str, Any]:
    """An upstream-style ``[keystone_authtoken]`` section for ``ks``."""
    return {
        "www_authenticate_uri": ks.url,
        "auth_url": ks.url,
        "auth_type": "password",
        "username": "placement",
        "password": PASSWORD,
        "project_name": "service",
        "user_domain_name": DOMAIN,
        "project_domain_name": DOMAIN,
        "service_token_roles_required": True,
    }
