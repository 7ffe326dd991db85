#!/bin/bash
# `make image-test`: the image, run by podman against this machine's
# MariaDB (127.0.0.1:3306, root) and PostgreSQL (127.0.0.1:5432,
# postgres), each in a fresh database dropped at the end:
#
#   placement-manage db sync, placement-status upgrade check (in the image)
#   berth serve with a mounted /etc/placement/placement.conf, host network,
#   a read-only root file system
#   from the host: a provider, its inventory, a claim, candidates, usages
#   the image's HEALTHCHECK (podman healthcheck run)
#   podman stop: SIGTERM, gone within the stop timeout with exit code 0
#
# Also: the image runs as placement (42482), and its default command
# stops with one line when no placement.conf is mounted.
#
#   deploy/container/test.sh [mysql] [postgresql]   (default: both)
#
# IMAGE (localhost/berth:latest) is built by `make image`. Needs podman,
# runc, and the mariadb and psql clients.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
. "$here/podman-env.sh"
IMAGE=${IMAGE:-localhost/berth:latest}
STOP_TIMEOUT=${STOP_TIMEOUT:-20}
DBS=("$@")
[ ${#DBS[@]} -gt 0 ] || DBS=(mysql postgresql)

say() { echo "test.sh: $(date -u +%H:%M:%S) $*"; }
fail() { echo "test.sh: FAIL: $*" >&2; exit 1; }

$PODMAN image exists "$IMAGE" || fail "no image $IMAGE: make image"

work=$(mktemp -d)
name=berth-image-test-$$
containers=()
databases=()
cleanup() {
    local c d
    for c in "${containers[@]}"; do
        $PODMAN rm --force --time 0 "$c" >/dev/null 2>&1 || true
    done
    for d in "${databases[@]}"; do drop_db "${d%%:*}" "${d#*:}" || true; done
    rm -rf "$work"
}
trap cleanup EXIT

create_db() {  # create_db KIND NAME
    case $1 in
        mysql) mysql -h 127.0.0.1 -u root -e "CREATE DATABASE $2" ;;
        postgresql) psql -q -h 127.0.0.1 -U postgres -c "CREATE DATABASE $2" ;;
    esac
    databases+=("$1:$2")
}
drop_db() {
    case $1 in
        mysql) mysql -h 127.0.0.1 -u root -e "DROP DATABASE IF EXISTS $2" ;;
        postgresql) psql -q -h 127.0.0.1 -U postgres -c "DROP DATABASE IF EXISTS $2" ;;
    esac
}
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# podman run for this test, without the HEALTHCHECK's timer (podman
# healthcheck run runs it). Without systemd podman says it cannot make
# the timer, whatever the interval: those lines are left out.
pod() {
    $PODMAN run --health-interval disable "$@" \
        2> >(grep -v 'unable to get systemd connection' >&2)
}
# On the host network (the databases are on the host's loopback), the
# configuration mounted read-only where kolla puts it.
run() {  # run CONF ARGS...
    local conf=$1; shift
    pod --network host \
        --volume "$conf:/etc/placement/placement.conf:ro,Z" "$@"
}

say "image $IMAGE: $($PODMAN image inspect --format '{{.Size}}' "$IMAGE" \
    | awk '{printf "%.0f MB", $1 / 1e6}')"
uid=$(pod --rm --network none "$IMAGE" id -u)
[ "$uid" = 42482 ] || fail "runs as uid $uid, not placement (42482)"
for cmd in berth placement-manage placement-status; do
    pod --rm --network none "$IMAGE" "$cmd" --help >/dev/null \
        || fail "$cmd is not on the image's PATH"
done
if out=$(pod --rm --network none "$IMAGE" 2>&1); then
    fail "the default command ran without a placement.conf"
fi
case $out in
    *"/etc/placement/placement.conf not found"*) ;;
    *) fail "the default command without a placement.conf said: $out" ;;
esac
say "placement (42482), commands on PATH, default command reads /etc/placement: ok"

for kind in "${DBS[@]}"; do
    db=berth_image_test_$$_$kind
    case $kind in
        mysql) url="mysql+pymysql://root@127.0.0.1:3306/$db" ;;
        postgresql) url="postgresql+psycopg://postgres@127.0.0.1:5432/$db" ;;
        *) fail "unknown database kind $kind (mysql, postgresql)" ;;
    esac
    say "$kind: fresh database $db"
    create_db "$kind" "$db"
    conf=$work/$kind.conf
    cat > "$conf" <<CONF
[placement_database]
connection = $url

[api]
# Written in the file: so Berth may serve it beyond loopback (0.0.0.0).
auth_strategy = noauth2
CONF
    chmod 0644 "$conf"

    run "$conf" --rm "$IMAGE" placement-manage db sync \
        || fail "$kind: placement-manage db sync"
    run "$conf" --rm "$IMAGE" placement-status upgrade check >/dev/null \
        || fail "$kind: placement-status upgrade check"
    say "$kind: placement-manage db sync, placement-status upgrade check: ok"

    port=$(free_port)
    ctr=$name-$kind
    containers+=("$ctr")
    # --read-only: the image needs nothing written but /tmp (a tmpfs
    # podman mounts; docker wants --tmpfs /tmp).
    run "$conf" --detach --name "$ctr" --read-only \
        --env BERTH_HEALTHCHECK_URL="http://127.0.0.1:$port/healthcheck" \
        "$IMAGE" berth serve --config-file /etc/placement/placement.conf \
        --host 0.0.0.0 --port "$port" >/dev/null
    up=
    for _ in $(seq 1 120); do
        if python3 -c 'import sys, urllib.request as u; u.urlopen(sys.argv[1], timeout=2)' \
                "http://127.0.0.1:$port/healthcheck" 2>/dev/null; then
            up=1; break
        fi
        [ "$($PODMAN inspect --format '{{.State.Running}}' "$ctr")" = true ] || break
        sleep 0.5
    done
    if [ -z "$up" ]; then
        $PODMAN logs "$ctr" | tail -20 >&2
        fail "$kind: berth serve did not answer on port $port"
    fi
    say "$kind: serving on 0.0.0.0:$port"
    python3 "$here/api_check.py" "http://127.0.0.1:$port" \
        || { $PODMAN logs "$ctr" | tail -20 >&2; fail "$kind: the API round"; }
    $PODMAN healthcheck run "$ctr" >/dev/null \
        || fail "$kind: the image's HEALTHCHECK says unhealthy"
    say "$kind: HEALTHCHECK: healthy"

    start=$(date +%s.%N)
    $PODMAN stop --time "$STOP_TIMEOUT" "$ctr" >/dev/null 2>"$work/stop.err" \
        || fail "$kind: podman stop: $(cat "$work/stop.err")"
    took=$(python3 -c "import sys, time; print('%.1f' % (time.time() - float(sys.argv[1])))" "$start")
    status=$($PODMAN inspect --format '{{.State.ExitCode}}' "$ctr")
    if [ "$status" != 0 ] || grep -q SIGKILL "$work/stop.err"; then
        $PODMAN logs "$ctr" | tail -20 >&2
        fail "$kind: stopped with exit code $status in ${took}s: $(cat "$work/stop.err")"
    fi
    $PODMAN logs "$ctr" >"$work/$kind.log" 2>&1
    grep -q "SIGTERM received" "$work/$kind.log" \
        || fail "$kind: no 'SIGTERM received' line in the container's log"
    say "$kind: SIGTERM: stopped in ${took}s, exit code 0"
    # (Its stderr: the HEALTHCHECK's timer again.)
    $PODMAN rm "$ctr" >/dev/null 2>&1 || fail "$kind: podman rm $ctr"
    drop_db "$kind" "$db"
    databases=()
done
say "all passed"
