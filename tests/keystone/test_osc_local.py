"""The osc-placement recipe of docs/walkthrough.md ("The openstack command
line"): python-openstackclient against a local noauth2 Berth, with no
Keystone, exactly as the doc writes it."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
from pathlib import Path

import pytest

from support import keystone as harness
from support.processes import BERTH, free_port, wait_ready
from tests.conftest import REQUIRE

DOC = Path(__file__).resolve().parents[2] / "docs" / "walkthrough.md"


def _recipe() -> list[str]:
    """The recipe's command, as the doc writes it, split into words."""
    section = DOC.read_text().split("## 6. The openstack command line")[1]
    block = re.search(r"```text\n(.*?)```", section, re.S)
    assert block is not None
    return block.group(1).replace("\\\n", " ").split()


def test_the_openstack_cli_recipe_works_against_a_local_berth(tmp_path: Path) -> None:
    openstack = harness.VENV / "bin" / "openstack"
    if not openstack.exists():
        msg = (
            "no openstack CLI at %s: make test builds it (or run: bash "
            ".ci/keystone.sh --venv-only)" % openstack
        )
        if REQUIRE:
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    words = _recipe()
    assert words[0] == "openstack" and "http://127.0.0.1:8778" in words
    port = free_port()
    words = [str(openstack)] + [
        w.replace("127.0.0.1:8778", "127.0.0.1:%d" % port) for w in words[1:]
    ]
    env = {**os.environ, "BERTH_DATA_DIR": str(tmp_path), "OS_PLACEMENT_CONFIG_DIR": ""}
    with subprocess.Popen(
        [*BERTH, "serve", "--port", str(port)], stderr=subprocess.DEVNULL, env=env
    ) as server:
        try:
            wait_ready("http://127.0.0.1:%d/" % port, server)
            clean = {k: v for k, v in os.environ.items() if not k.startswith("OS_")}
            create = subprocess.run(
                words[:-3] + ["resource", "provider", "create", "cn-osc", "-f", "json"],
                capture_output=True,
                text=True,
                timeout=120,
                env=clean,
            )
            assert create.returncode == 0, create.stderr
            listed = subprocess.run(
                words + ["-f", "json"], capture_output=True, text=True, timeout=120, env=clean
            )
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=20)
    assert listed.returncode == 0, listed.stderr
    names = [p["name"] for p in json.loads(listed.stdout)]
    assert names == ["cn-osc"]
