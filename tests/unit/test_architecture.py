"""The import contracts of pyproject.toml ([tool.importlinter]; the house
in docs/architecture.md): nothing imports a layer above it, no package
has a circle, handlers never import handlers.

The contracts are checked on the real tree, and on a copy with one import
planted that breaks each kind of rule, so a contract that stopped matching
anything (a renamed package, a layer left out) fails here too.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(src: Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(src))
    return subprocess.run(
        [str(LINT), "--no-cache"], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_the_tree_keeps_every_import_contract() -> None:
    result = _lint(ROOT / "src", ROOT)
    assert result.returncode == 0, result.stdout[-4000:]
    assert result.stdout.strip().splitlines()[-1].endswith(" 0 broken.")


#: (module to edit, import line planted at its end, contract it breaks)
PLANTED = [
    (
        "db/tables.py",
        "from berth.domain import errors as _up",
        "each package imports only the packages below it",
    ),
    (
        "domain/capacity.py",
        "from berth.api import render as _up",
        "each package imports only the packages below it",
    ),
    (
        "conf/check.py",
        "from berth.serve import memory as _up",
        "each package imports only the packages below it",
    ),
    (
        "api/handlers/usage.py",
        "from berth.api.handlers import trait as _side",
        "handlers never import handlers",
    ),
    ("domain/trait.py", "import falcon as _http", "the domain and the database never import HTTP"),
    (
        "serve/memory.py",
        "import gunicorn as _server",
        "berth.wsgi (uwsgi, mod_wsgi) imports no gunicorn",
    ),
    ("client/records.py", "import sqlalchemy as _sql", "the client library talks HTTP only"),
    (
        "cli/common.py",
        "from berth.cli import db as _up",
        "commands share berth.cli.common, not each other",
    ),
    (
        "domain/errors.py",
        "from berth.domain import trait as _round",
        "no circle between the modules of any package",
    ),
]


@pytest.mark.parametrize(
    "module,line,contract", PLANTED, ids=[p[0] + ":" + p[2].split()[0] for p in PLANTED]
)
def test_a_planted_import_breaks_its_contract(
    tmp_path: Path, module: str, line: str, contract: str
) -> None:
    shutil.copytree(ROOT / "src" / "berth", tmp_path / "src" / "berth")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / "src" / "berth" / module
    target.write_text(target.read_text() + "\n" + line + "  # noqa\n")
    result = _lint(tmp_path / "src", tmp_path)
    assert result.returncode != 0
    broken = [row for row in result.stdout.splitlines() if " BROKEN" in row]
    assert any(row.startswith(contract) for row in broken), result.stdout[-3000:]
