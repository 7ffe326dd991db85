#!/usr/bin/env bash
# Builds .upstream-venv (upstream Placement 16.0.0, gunicorn and its
# database drivers) from PyPI, for the import/export stress tests and the
# benchmarks. A fresh machine takes a few minutes; an existing venv is kept.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
.venv/bin/python - <<'PY'
import importlib.util
spec = importlib.util.spec_from_file_location("servers", "bench/servers.py")
servers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(servers)
print("upstream venv:", servers.ensure_upstream_venv())
PY
