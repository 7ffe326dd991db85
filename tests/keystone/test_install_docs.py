"""docs/install.md's Keystone setup, run verbatim against a fresh
Keystone: its ``openstack`` commands, then its ``placement.conf``."""

from __future__ import annotations

import os
import re
import subprocess

import pytest
from keystoneauth1 import session as ks_session
from keystoneauth1.identity import v3

from berth import conf as berth_conf
from berth.api.app import create_app
from berth.db import migrate
from berth.db.engine import Database, create_engine
from support import keystone as harness
from tests.keystone.conftest import client, memcached_stats

pytestmark = pytest.mark.stress

DOC = harness.REPO / "docs" / "install.md"
PLACEMENT_URL = "http://127.0.0.1:8778"


def _blocks() -> tuple[str, str]:
    text = DOC.read_text()
    start = text.index("### Keystone")
    end = re.compile(r"^#{2,3} ", re.M).search(text, start + 1)
    section = text[start : end.start() if end else len(text)]
    sh = re.search(r"```sh\n(.*?)```", section, re.S)
    ini = re.search(r"```ini\n(.*?)```", section, re.S)
    assert sh and ini
    return sh.group(1), ini.group(1)


def _forget_test_people(ks: harness.Keystone) -> None:
    """The template already has what the docs create: remove it."""
    tok = ks.admin_token()
    for name in ("placement", "nova"):
        ks.api("DELETE", "/v3/users/" + ks.ids["user:" + name], tok)
    project = "/v3/projects/" + ks.ids["project:service"]
    ks.api("PATCH", project, tok, json={"project": {"enabled": False}})
    ks.api("DELETE", project, tok)


def test_install_docs_keystone_setup(tmp_path, memcached):
    # Once, on SQLite: the database plays no part here.
    db = Database(create_engine("sqlite:///%s" % (tmp_path / "p.sqlite")))
    migrate.upgrade(db.engine)
    commands, ini = _blocks()
    ks = harness.Keystone.create(tmp_path / "ks")
    try:
        harness.populate(ks, None)
        _forget_test_people(ks)
        env = dict(
            os.environ,
            OS_AUTH_URL=ks.url + "/v3",
            OS_IDENTITY_API_VERSION="3",
            OS_USERNAME="admin",
            OS_PASSWORD=harness.ADMIN_PASSWORD,
            OS_PROJECT_NAME="admin",
            OS_USER_DOMAIN_NAME="Default",
            OS_PROJECT_DOMAIN_NAME="Default",
            PLACEMENT_PASSWORD="placement-secret",
            NOVA_PASSWORD="nova-secret",
            PLACEMENT_URL=PLACEMENT_URL,
            PATH="%s:%s" % (harness.VENV / "bin", os.environ["PATH"]),
        )
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", commands],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert proc.returncode == 0, proc.stderr
        # The nova user finds Placement in the catalog...
        sess = ks_session.Session(
            auth=v3.Password(
                auth_url=ks.url + "/v3",
                username="nova",
                password="nova-secret",
                project_name="service",
                user_domain_name="Default",
                project_domain_name="Default",
            )
        )
        assert sess.get_endpoint(service_type="placement", interface="internal") == PLACEMENT_URL
        # ...and Berth, configured as the docs say, serves its token.
        conf_text = ini.replace("http://keystone.example:5000", ks.url).replace(
            "memcached.example:11211", memcached
        )
        path = tmp_path / "placement.conf"
        path.write_text(
            conf_text
            + "\n[placement_database]\nconnection = %s\n"
            % db.engine.url.render_as_string(hide_password=False)
        )
        app = create_app(berth_conf.load(["--config-file", str(path)]), db)
        sets = memcached_stats(memcached)["cmd_set"]
        with client(app, sess.get_token()) as c:
            r = c.post("/resource_providers", json={"name": "cn1"})
        assert r.status_code == 200, r.text
        assert memcached_stats(memcached)["cmd_set"] > sets
        sess.session.close()
    finally:
        ks.stop()
        db.engine.dispose()
