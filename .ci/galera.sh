#!/usr/bin/env bash
# The three-node MariaDB Galera cluster the stress suite's Galera tests use
# (support/galera.py: SQL on 127.0.0.1:23071-23073, group communication and
# state transfer on 24671-24693). The system MariaDB on 3306 is left alone.
#
#   .ci/galera.sh start   install the packages if missing, start the cluster
#   .ci/galera.sh stop    stop it
#
# The pytest fixture would start the cluster itself; starting it here first
# makes a failure to start show up on its own, before the suite runs.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

case "${1:-start}" in
  start)
    if [ ! -e /usr/lib/galera/libgalera_smm.so ] || ! command -v rsync >/dev/null \
        || ! command -v mariadb-install-db >/dev/null; then
      apt-get update
      # galera-4: the replication provider; rsync: state transfer to a
      # joining node; mariadb-server: mariadbd and mariadb-install-db.
      DEBIAN_FRONTEND=noninteractive apt-get install -y galera-4 rsync mariadb-server
    fi
    PY=python3
    [ -x .venv/bin/python ] && PY=.venv/bin/python
    "$PY" -m support.galera start
    ;;
  stop)
    PY=python3
    [ -x .venv/bin/python ] && PY=.venv/bin/python
    "$PY" -m support.galera stop
    ;;
  *)
    echo "usage: $0 start|stop" >&2
    exit 2
    ;;
esac
