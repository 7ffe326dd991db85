#!/usr/bin/env bash
# What tests/functional/test_wsgi_deploy.py needs to serve deploy/uwsgi
# and deploy/apache: uWSGI in .venv (from the package index, compiled for
# that venv's Python: needs a C compiler; about a minute), Debian's Apache
# httpd and mod_wsgi, and .apache-venv, Berth (editable) in a venv of
# Debian's python3, the Python Debian's mod_wsgi embeds (about 40 s).
# Idempotent: a second run only checks. Run after `make install-test`;
# then BERTH_REQUIRE_DEPLOY=1 makes those tests fail instead of skip.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

UWSGI=uwsgi==2.0.31
if [ "$(.venv/bin/uwsgi --version 2>/dev/null || true)" != "${UWSGI#uwsgi==}" ]; then
  .venv/bin/pip install -q "$UWSGI"
fi

if [ ! -x /usr/sbin/apache2 ] || [ ! -f /usr/lib/apache2/modules/mod_wsgi.so ] \
    || ! /usr/bin/python3 -c 'import ensurepip' >/dev/null 2>&1; then
  apt-get update -q
  apt-get install -y -q apache2 libapache2-mod-wsgi-py3 python3-venv
fi

VENV=${BERTH_APACHE_VENV:-.apache-venv}
if [ ! -x "$VENV/bin/python" ]; then
  /usr/bin/python3 -m venv "$VENV"
  "$VENV/bin/pip" install -q --upgrade pip
fi
# git ignores the venv whole, as venvs of Python 3.13 and later say themselves.
[ -f "$VENV/.gitignore" ] || echo '*' > "$VENV/.gitignore"
if [ ! -f "$VENV/.installed" ] || [ pyproject.toml -nt "$VENV/.installed" ]; then
  "$VENV/bin/pip" install -q -e .
  touch "$VENV/.installed"
fi
echo "deploy: $(.venv/bin/uwsgi --version) uWSGI;" \
  "$(/usr/sbin/apache2 -v | head -n1);" \
  "$("$VENV/bin/python" --version) in $VENV"
