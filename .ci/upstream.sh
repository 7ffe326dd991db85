#!/usr/bin/env bash
# Builds .upstream-venv (upstream Placement 16.0.0, gunicorn and its
# database drivers) from PyPI, for the import/export stress tests and the
# benchmarks. A fresh machine takes a few minutes; an existing venv is kept.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
.venv/bin/python - <<'PY'
from support.servers import ensure_upstream_venv
print("upstream venv:", ensure_upstream_venv())
PY
