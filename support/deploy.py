"""Where the uWSGI and Apache deployments that ``.ci/deploy.sh``
installs live (test_wsgi_deploy.py), and ``missing``, which skips a test
without them (or fails it under ``BERTH_REQUIRE_DEPLOY=1``).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]


REQUIRE_DEPLOY = os.environ.get("BERTH_REQUIRE_DEPLOY") == "1"


UWSGI = Path(sys.executable).parent / "uwsgi"


APACHE = Path("/usr/sbin/apache2")


APACHE_MODULES = Path("/usr/lib/apache2/modules")


APACHE_VENV = Path(os.environ.get("BERTH_APACHE_VENV", REPO_ROOT / ".apache-venv"))


def missing(what: str) -> None:
    """Skip (or, under ``BERTH_REQUIRE_DEPLOY=1``, fail) for ``what``."""
    msg = "%s; install with `bash .ci/deploy.sh`" % what
    if REQUIRE_DEPLOY:
        pytest.fail(msg + " (BERTH_REQUIRE_DEPLOY=1 needs it)", pytrace=False)
    pytest.skip(msg)


def python_of_mod_wsgi() -> str:
    """The ``pythonX.Y`` Debian's mod_wsgi is linked with, or ''."""
    out = subprocess.run(
        ["ldd", str(APACHE_MODULES / "mod_wsgi.so")], capture_output=True, text=True
    )
    found = re.search(r"libpython(\d+\.\d+)", out.stdout)
    return "python" + found.group(1) if found else ""
