"""Errors a person meets on the command line are one line that says what
is wrong and what was probably meant (berth.cli.common.Parser,
berth.cli.upstream)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def berth(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "berth.cli", *args], capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    "args,usage,error",
    [
        (
            ["serve", "--prot", "18779"],
            "usage: berth serve ",
            "berth serve: error: unrecognized arguments: --prot 18779 (did you mean --port?)",
        ),
        (
            ["db", "sync", "--confg-file", "x"],
            "usage: berth db sync ",
            "berth db sync: error: unrecognized arguments: --confg-file x "
            "(did you mean --config-file?)",
        ),
        (["sevre"], "usage: berth ", "(did you mean serve?)"),
        (["db", "snyc"], "usage: berth db ", "(did you mean sync?)"),
        (
            ["policy", "list", "--zzz"],
            "usage: berth policy list ",
            "berth policy list: error: unrecognized arguments: --zzz",
        ),
    ],
    ids=["option", "config-option", "command", "action", "nothing-near"],
)
def test_a_usage_error_names_its_command_and_what_was_meant(
    args: list[str], usage: str, error: str
) -> None:
    result = berth(*args)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert lines[0].startswith(usage)
    assert lines[-1].endswith(error) or lines[-1] == error
    assert "Traceback" not in result.stderr


def test_placement_manage_help_has_no_empty_section_header() -> None:
    for command in ("placement-manage", "placement-status"):
        result = subprocess.run(
            [str(BIN / command), "--help"], capture_output=True, text=True, timeout=60
        )
        assert result.returncode == 0
        lines = result.stdout.splitlines()
        assert ":" not in [line.strip() for line in lines]
        assert "commands:" in lines
