#!/usr/bin/env bash
# Berth on another set of its dependencies' versions (issue 36: every
# version Berth declares works).
#
#   .ci/matrix.sh MODE [--full] [--prepare | --prepared]
#
# MODE is one of
#   lowest            every runtime dependency at the lower bound of
#                     pyproject.toml (pins from .ci/lowest.py); the
#                     transitive ones float
#   openstack-master  OpenStack's upper-constraints (../shared/constraints),
#   openstack-2026.1  as Kolla, OpenStack-Ansible and devstack install
#
# Each mode builds its own venv, .venv-MODE (from scratch: a stale one
# could hide a version), installs Berth with that set, then the test
# extras, newest, moving none of the declared dependencies; prints the
# declared, pinned and installed version of each dependency and fails
# unless each pinned one is what is installed; then runs the unit tests
# and the functional tests on SQLite and PostgreSQL, every backend
# required, and upstream's HTTP test files against that venv's `berth`.
#
# By default the functional tests are the files that exercise what the
# dependencies touch (FUNCTIONAL below); the conformance run is a sample
# of upstream's files (CONFORMANCE) in each mode (the dev venv's run takes
# every file, and the whole run stays within CI's hour); --full runs every functional file
# and every conformance file in each mode. BERTH_SHARED points at the shared
# folder (default ../shared, beside the checkout); BERTH_MATRIX_DBS the
# backends of the tests (default sqlite,postgresql); TEST_WORKERS their
# pytest-xdist workers (default auto, one per core), as in the Makefile.
#
# --prepare only builds the mode's venv (and checks its versions), and
# --prepared runs the tests in the venv a --prepare left, building it
# only if there is none: CI builds the three venvs in the background
# while the conformance and fuzz stages take the cores (.ci/run).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

usage() {
  echo "usage: $0 lowest|openstack-master|openstack-2026.1 [--full] [--prepare|--prepared]" >&2
  exit 2
}
[ $# -ge 1 ] || usage
mode=$1
shift
full= prepare= prepared=
for arg in "$@"; do
  case $arg in
    --full) full=1 ;;
    --prepare) prepare=1 ;;
    --prepared) prepared=1 ;;
    *) usage ;;
  esac
done
[ -z "$prepare" ] || [ -z "$prepared" ] || usage
shared=${BERTH_SHARED:-../shared}
venv=.venv-$mode
log() { printf '\n=== matrix %s: %s\n' "$mode" "$*"; }

# The tests of the library versions themselves, and the docs generated
# from the newest libraries' options (the dev venv checks those). The
# candidate engine's search, order and world-patch tests run in the dev
# venv only: that code uses the standard library alone (of os-traits, one
# trait's name), so another release of a dependency cannot change what
# they test, and they are a minute of each mode.
DESELECT=(
  --deselect tests/unit/test_docs.py::test_config_reference_is_current
  --deselect tests/unit/test_docs.py::test_cli_reference_is_current
  --deselect tests/unit/test_architecture.py
)
for engine in explain fit order order_rankings order_ties planner rankings_blocks \
    search search_memo search_oracle world_patch world_patch_refresh; do
  DESELECT+=(--ignore "tests/unit/test_allocation_candidate_$engine.py")
done
# The database layer and migrations, the engine, the request schemas, the
# HTTP stack (falcon, gunicorn, oslo.middleware, keystonemiddleware), the
# configuration and policy (oslo.*), the change feed (psycopg, aiohttp),
# logging, metrics and the dashboard (Jinja2).
FUNCTIONAL=(
  tests/functional/test_resource_provider.py
  tests/functional/test_allocation.py
  tests/functional/test_allocation_candidate.py
  tests/functional/test_inventory.py
  tests/functional/test_trait.py
  tests/functional/test_reshaper.py
  tests/functional/test_usage.py
  tests/functional/test_http_core.py
  tests/functional/test_hostile_input.py
  tests/functional/test_hostile_input_numbers.py
  tests/functional/test_app_middleware.py
  tests/functional/test_healthcheck.py
  tests/functional/test_serve.py
  tests/functional/test_wsgi.py
  tests/functional/test_cli.py
  tests/functional/test_cli_upstream.py
  tests/functional/test_conf_opts.py
  tests/functional/test_logs.py
  tests/functional/test_metrics.py
  tests/functional/test_change.py
  tests/functional/test_change_filters.py
  tests/functional/test_change_queries.py
  tests/functional/test_change_watch_serve.py
  tests/functional/test_change_watch_notify.py
  tests/functional/test_db_connection.py
  tests/functional/test_db_connection_fallback.py
  tests/functional/test_db_connection_thin.py
  tests/functional/test_db_connection_thin_text.py
  tests/functional/test_serve_deploy.py
  tests/functional/test_conf_check.py
  tests/functional/test_cli_read_only.py
  tests/functional/test_dashboard.py
)
# Upstream's files over every area, with each policy flavour (oslo.policy
# decides those): legacy RBAC, secure RBAC, a policy file.
CONFORMANCE=(
  allocation-candidates allocation-candidates-legacy-rbac granular
  allocations 'allocations-1*' allocations-secure-rbac inventory
  inventory-secure-rbac resource-provider resource-provider-legacy-rbac
  traits traits-policy usage reshaper aggregate microversion cors non-cors
  basic-http confirm-auth unicode
)

case $mode in
  lowest) constraints_src="" ;;
  openstack-master|openstack-2026.1)
    constraints_src=$shared/constraints/$mode.txt
    [ -r "$constraints_src" ] || { echo "matrix: $constraints_src not found" >&2; exit 1; } ;;
  *) usage ;;
esac

start=$SECONDS
pins=$venv/constraints.txt
# A venv a --prepare finished (its last step writes .prepared) is used as
# it is; any other is built again from scratch.
if [ -n "$prepared" ] && [ -f "$venv/.prepared" ]; then
  log "venv $venv (built by --prepare)"
else
  log "venv $venv"
  rm -rf "$venv"
  python3 -m venv "$venv"
  if [ -z "$constraints_src" ]; then
    python3 .ci/lowest.py > "$pins"
  else
    cp "$constraints_src" "$pins"
  fi
  # uv (the test extras put it in .venv) installs the same packages as pip
  # (compared for each mode when it came in), in seconds where pip takes
  # a minute and more of CPU; pip where there is no uv.
  if [ -x .venv/bin/uv ]; then
    venv_install() { .venv/bin/uv pip install -q --python "$venv/bin/python" "$@"; }
  else
    "$venv/bin/pip" install -q --upgrade pip
    venv_install() { "$venv/bin/pip" install -q "$@"; }
  fi
  venv_install -e . -c "$pins"
  # The test extras, newest, with the declared dependencies held where they
  # are (what they pull in alone may move).
  "$venv/bin/python" .ci/lowest.py --freeze > "$venv/runtime.txt"
  venv_install -e '.[test]' -c "$venv/runtime.txt"
fi

log "versions (pinned: as $( [ -z "$constraints_src" ] && echo "pyproject's lower bounds" || echo "$constraints_src"))"
"$venv/bin/python" .ci/lowest.py --installed "$pins"
log "install: $((SECONDS - start)) s"
if [ -n "$prepare" ]; then
  touch "$venv/.prepared"
  exit 0
fi
# Each prepared venv serves one run: a later --prepared builds afresh
# unless another --prepare ran.
rm -f "$venv/.prepared"

rc=0
t=$SECONDS
log "unit and functional tests (${BERTH_MATRIX_DBS:-sqlite,postgresql})"
functional=("${FUNCTIONAL[@]}")
[ -z "$full" ] || functional=(tests/functional)
# -p no:anyio: the tests use no anyio, and the anyio that a constraints
# file pins may load a pytest plugin the newest pytest warns about.
BERTH_TEST_DBS=${BERTH_MATRIX_DBS:-sqlite,postgresql} BERTH_REQUIRE_DBS=1 \
  "$venv/bin/pytest" -q -p no:cacheprovider -p no:anyio -n "${TEST_WORKERS:-auto}" "${DESELECT[@]}" \
  tests/unit "${functional[@]}" || rc=1
log "tests: $((SECONDS - t)) s"

t=$SECONDS
log "conformance with $venv/bin/berth"
# The sample (half a minute; every file, a minute and a half, with --full).
conformance=("${CONFORMANCE[@]}")
[ -z "$full" ] || conformance=()
if [ -x "$shared/conformance/run" ]; then
  BERTH_BIN=$PWD/$venv/bin/berth "$shared/conformance/run" "${conformance[@]}" || rc=1
else
  echo "matrix: $shared/conformance/run not found" >&2
  rc=1
fi
log "conformance: $((SECONDS - t)) s; the mode: $((SECONDS - start)) s"
exit $rc
