#!/usr/bin/env bash
# A plain install is complete: build the wheel, install it into a fresh
# venv WITHOUT the test extras, and use it as an operator would, from a
# folder outside the checkout (so nothing is imported from src/).
# Takes about a minute (most of it installing the dependencies).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
WORK=$(mktemp -d "${TMPDIR:-/tmp}/berth-install-check.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

step() { printf '\n--- install check: %s\n' "$*"; }

step "build the wheel (in pip's isolated build environment)"
python3 -m venv "$WORK/venv"
"$WORK/venv/bin/pip" wheel -q --no-deps -w "$WORK/dist" "$ROOT"
WHEEL=$(ls "$WORK"/dist/berth-*.whl)

step "install $(basename "$WHEEL") into the clean venv (no extras)"
"$WORK/venv/bin/pip" install -q "$WHEEL"
BIN=$WORK/venv/bin
cd "$WORK"

# Test-only packages must not have come along: the check is meaningless
# if they did.
for pkg in pytest hypothesis; do
  if "$BIN/python" -c "import $pkg" 2>/dev/null; then
    echo "install check: $pkg is installed without the test extra" >&2
    exit 1
  fi
done

step "every command's --help"
for cmd in "" serve "db" "db sync" "db version" "db import" "db export" "db verify" \
           "policy" "policy list" \
           "status" "status upgrade" "status upgrade check" migrate-inventory; do
  # shellcheck disable=SC2086  # the words are the sub-commands
  "$BIN/berth" $cmd --help >/dev/null
done
for cmd in "" "db" "db sync" "db version" "db stamp" "db online_data_migrations"; do
  # shellcheck disable=SC2086
  "$BIN/placement-manage" $cmd --help >/dev/null
done
"$BIN/placement-status" --help >/dev/null
"$BIN/placement-status" upgrade --help >/dev/null

step "public modules import"
"$BIN/python" -c '
import berth.client, berth.direct, berth.client.agent, berth.cli.status, berth.cli.upstream
import berth.api.app, berth.domain.online, berth.db.urls, berth.examples.vgpu
from berth.client import ProviderTree, ReportClient
from berth.direct import PlacementDirect
print("imported", berth.client.__name__, berth.direct.__name__)
'

step "db sync, upgrade check, a real migrate-inventory, the WSGI module"
mkdir -p "$WORK/etc"
# noauth2, said in the file: with keystone (the default) and no
# [keystone_authtoken], serve, the WSGI module and the upgrade check refuse.
cat > "$WORK/etc/placement.conf" <<CONF
[api]
auth_strategy = noauth2
[placement_database]
connection = sqlite:///$WORK/placement.sqlite
CONF
"$BIN/placement-manage" --config-file "$WORK/etc/placement.conf" db sync
"$BIN/berth" db version --config-file "$WORK/etc/placement.conf"
"$BIN/placement-status" --config-file "$WORK/etc/placement.conf" upgrade check >/dev/null
BERTH_EXAMPLE_VGPU='{"compute-1": {"vcpus": 16, "memory_mb": 32768, "gpus": {"gpu0": 4, "gpu1": 4}}}' \
  "$BIN/berth" migrate-inventory --config-file "$WORK/etc/placement.conf" \
    --driver berth.examples.vgpu:VGPUDriver | tee "$WORK/migrate.out"
grep -Eq '^compute-1: (updated|reshaped) \([0-9]+ writes?\)' "$WORK/migrate.out"
OS_PLACEMENT_CONFIG_DIR="$WORK/etc" "$BIN/python" -c \
  'import berth.wsgi; assert callable(berth.wsgi.application)'

step "passed"
