#!/usr/bin/env bash
# Schemathesis against a live `berth serve`, driven by its own
# /openapi.json: examples, coverage, fuzzing and stateful phases (links:
# provider -> inventories -> allocations), all checks. Fails on any 5xx,
# any answer that breaks the document, and any ERROR line (a traceback)
# in the server log.
#
# Usage: .ci/fuzz.sh [sqlite|postgresql]...   (default: sqlite postgresql)
# Two passes per backend: one with the microversion header as generated
# from the document (mostly 1.0 or unrelated values), one pinned to
# `placement latest`. Bounded: FUZZ_MAX_TIME seconds per pass (default
# 30), plus a few seconds of start-up: about 2.5 minutes for both backends
# (CI's whole run must stay within the hour).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PY=${PY:-.venv/bin/python}
BERTH=${BERTH:-.venv/bin/berth}
ST=${ST:-$PWD/.venv/bin/schemathesis}
MAX_TIME=${FUZZ_MAX_TIME:-30}
PG_ADMIN=${BERTH_TEST_PG_URL:-postgresql+psycopg://postgres@127.0.0.1:5432/postgres}
backends=("$@")
[ ${#backends[@]} -gt 0 ] || backends=(sqlite postgresql)

work=$(mktemp -d /tmp/berth-fuzz.XXXXXX)
server=""
pgdb=""
cleanup() {
  if [ -n "$server" ]; then kill "$server" 2>/dev/null || true; wait "$server" 2>/dev/null || true; fi
  if [ -n "$pgdb" ]; then "$PY" .ci/fuzz_db.py drop "$PG_ADMIN" "$pgdb" || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { "$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

run_one() {
  local backend=$1 url port conf log rc=0
  case "$backend" in
    sqlite) url="sqlite:///$work/fuzz.sqlite" ;;
    postgresql)
      pgdb="berth_fuzz_$$"
      url=$("$PY" .ci/fuzz_db.py create "$PG_ADMIN" "$pgdb") ;;
    *) echo "fuzz: unknown backend $backend" >&2; return 2 ;;
  esac
  port=$(free_port)
  conf="$work/$backend.conf"
  log="$work/$backend.log"
  cat > "$conf" <<CONF
[api]
auth_strategy = noauth2
[placement_database]
connection = $url
CONF
  "$BERTH" db sync --config-file "$conf" >/dev/null
  "$BERTH" serve --config-file "$conf" --port "$port" --workers 1 >"$log" 2>&1 &
  server=$!
  echo "fuzz[$backend]: berth serve on 127.0.0.1:$port (log $log)"
  # Checks left out: ignored_auth (noauth2 takes any token by design),
  # positive_data_acceptance (a valid body may still meet a 404 or 409),
  # use_after_free and ensure_resource_availability (a provider deleted,
  # then re-created with a generated uuid, is not a bug).
  # The reshaper's policy wants the service role, hence X-Roles.
  local pass
  for pass in generated latest; do
    local pin=()
    [ "$pass" = latest ] && pin=(-H "OpenStack-API-Version: placement latest")
    # From the scratch folder: schemathesis keeps a cache in its cwd.
    (cd "$work" && "$ST" run "http://127.0.0.1:$port/openapi.json" \
      --wait-for-schema 30 \
      --checks all \
      --exclude-checks ignored_auth,positive_data_acceptance,use_after_free,ensure_resource_availability \
      -H "X-Auth-Token: admin" -H "X-Roles: admin,service" "${pin[@]}" \
      --max-time "$MAX_TIME" --workers 1 --seed 20261130 \
      --generation-database none \
      --report junit --report-dir "$work/report-$backend-$pass" \
      --no-color) || rc=$?
  done
  kill "$server"; wait "$server" 2>/dev/null || true; server=""
  if grep -E " ERROR |\[ERROR\]|Traceback" "$log" >/dev/null; then
    echo "fuzz[$backend]: server errors in the log:" >&2
    grep -E -A20 " ERROR |\[ERROR\]|Traceback" "$log" | head -80 >&2
    rc=1
  fi
  if [ "$backend" = postgresql ]; then "$PY" .ci/fuzz_db.py drop "$PG_ADMIN" "$pgdb"; pgdb=""; fi
  return "$rc"
}

status=0
for b in "${backends[@]}"; do
  run_one "$b" || status=1
done
exit "$status"
