#!/usr/bin/env bash
# The candidate files of ../shared/conformance again, with each scored
# or random order of [berth] candidate_order configured (the full run
# uses the default, uuid). No file there pins an order, so every one
# must pass in every order.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
berth="$PWD/.venv/bin/berth"
extra=$(mktemp -d)
trap 'rm -rf "$extra"' EXIT
for order in spread pack random; do
  printf '[berth]\ncandidate_order = %s\n' "$order" > "$extra/$order.conf"
  echo "--- candidate_order = $order"
  ../shared/conformance/run \
    --sync "$berth db sync --config-file {conf}" \
    --serve "$berth serve --config-file {conf} --config-file $extra/$order.conf --host 127.0.0.1 --port {port} --workers 1" \
    'allocation-candidates*' granular.yaml granular-same-subtree.yaml shared-resources.yaml
done
