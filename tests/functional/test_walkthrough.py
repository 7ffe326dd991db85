"""docs/walkthrough.md works as written: its shell blocks run, in order,
against a real `berth serve` on an embedded database.

Covers docs/walkthrough.md (the CLI and the API as a reader meets them)."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from support.processes import free_port, wait_ready

DOC = Path(__file__).resolve().parents[2] / "docs" / "walkthrough.md"


@pytest.mark.skipif(not shutil.which("curl"), reason="needs curl")
def test_walkthrough_runs_as_written(tmp_path):
    text = DOC.read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    # Every block says the shell it needs (or is text), and runs in it
    # unchanged.
    fences = re.findall(r"^```(\w*)$", text, re.M)
    assert set(fences[0::2]) == {"bash", "text"}, fences
    port = free_port()
    script = "set -euo pipefail\n" + "\n".join(blocks)
    env = {**os.environ, "BERTH_DATA_DIR": str(tmp_path), "OS_PLACEMENT_CONFIG_DIR": ""}
    cmd = [sys.executable, "-m", "berth.cli", "serve", "--port", str(port)]
    with subprocess.Popen(cmd, stderr=subprocess.DEVNULL, env=env) as server:
        try:
            wait_ready("http://127.0.0.1:%d/" % port, server)
            result = subprocess.run(
                ["bash", "-c", script],
                capture_output=True,
                text=True,
                timeout=120,
                env={**os.environ, "P": "http://127.0.0.1:%d" % port},
            )
        finally:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=20)
    out = result.stdout
    assert result.returncode == 0, result.stderr + out
    assert "errors" not in out, out
    # Each reply on a line of its own.
    assert "}{" not in out, out
    candidates = re.findall(r'"allocation_requests":\[(.*?)\],"provider_summaries"', out)
    counts = [c.count('"allocations"') for c in candidates]
    assert counts[:2] == [4, 2], out
    assert re.search(r"\b204\n", out), out
    usages = out[out.rindex('{"usages"') :]
    for part in (
        '"VCPU":4',
        '"MEMORY_MB":8192',
        '"DISK_GB":100',
        '"consumer_count":1',
        '"INSTANCE"',
    ):
        assert part in usages, usages
