#!/usr/bin/env bash
# What the tests against a real Keystone need (tests/keystone): Debian's
# memcached (the tests start their own on a free loopback port), a venv
# with Keystone, gunicorn and the operator CLI (osc-placement), and the
# bootstrapped Keystone template the test fixture copies. Idempotent: a
# second run only checks. Run after `make install-test`.
#   --venv-only   only what the package index gives (`make test` uses it):
#                 no apt-get; without memcached its tests skip, saying so.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ "${1:-}" != "--venv-only" ] && ! command -v memcached >/dev/null 2>&1 \
    && [ ! -x /usr/bin/memcached ]; then
  apt-get update -q
  apt-get install -y -q memcached
fi

VENV=${BERTH_KEYSTONE_VENV:-.keystone-venv}
PACKAGES="keystone==30.0.0 gunicorn python-openstackclient==10.5.0 osc-placement==4.9.1"
if [ ! -f "$VENV/.installed" ] || [ "$(cat "$VENV/.installed")" != "$PACKAGES" ]; then
  rm -rf "$VENV"
  python3 -m venv "$VENV"
  # shellcheck disable=SC2086
  "$VENV/bin/pip" install -q $PACKAGES
  echo "$PACKAGES" > "$VENV/.installed"
fi

# db_sync, keys, bootstrap and the test users, once per venv.
BERTH_KEYSTONE_VENV="$VENV" .venv/bin/python -c \
  'from support import keystone; print("keystone template:", keystone._template())'
