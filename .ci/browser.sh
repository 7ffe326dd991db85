#!/usr/bin/env bash
# The dashboard in a real browser: installs Debian's chromium (Playwright's
# own browser download is never used) and runs tests/browser against a
# live berth serve. A missing browser fails here (CI=true). About 1-2 min
# plus the apt install.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
apt-get update
apt-get install -y chromium
test -x /usr/bin/chromium
CI=true .venv/bin/pytest tests/browser -q
