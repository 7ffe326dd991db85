"""docs/install.md "Moving from upstream Placement": its Berth commands
are real ones (the stress test runs them against upstream)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from berth.cli.run import build_parser

DOC = Path(__file__).resolve().parents[2] / "docs" / "install.md"


def section() -> str:
    text = DOC.read_text()
    start = text.index("### Moving from upstream Placement")
    return text[start : text.index("\n### ", start + 1)]


def test_every_berth_command_in_the_switch_over_parses():
    blocks = re.findall(r"```sh\n(.*?)```", section(), re.S)
    commands = [
        line.strip()
        for block in blocks
        for line in block.splitlines()
        if line.strip().startswith("berth ")
    ]
    assert {c.split()[2] for c in commands if c.split()[1] == "db"} == {
        "import",
        "verify",
        "export",
    }
    parser = build_parser()
    for command in commands:
        args = parser.parse_args(shlex.split(command)[1:])
        assert args.config_file == ["/etc/placement/placement.conf"]


def test_the_stress_test_runs_each_step():
    test = (DOC.parents[1] / "tests" / "functional" / "test_db_transfer_upstream.py").read_text()
    for step in ('"import", "--from"', '"verify", "--against"', '"export", "--to"'):
        assert step in test
