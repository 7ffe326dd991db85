# shellcheck shell=bash
# Sourced by deploy/container's scripts: podman's command and settings.
#
# PODMAN: the command (default podman). CONTAINERS_CONF: as set by the
# caller, else /etc/containers/containers.conf when the machine has one,
# else deploy/container/containers.conf (no default ulimits, cgroupfs).
PODMAN=${PODMAN:-podman}
if [ -z "${CONTAINERS_CONF:-}" ] && [ ! -e /etc/containers/containers.conf ]; then
    CONTAINERS_CONF="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/containers.conf"
    export CONTAINERS_CONF
fi
if ! command -v "$PODMAN" >/dev/null; then
    echo "${0##*/}: $PODMAN is missing: apt-get install podman runc" >&2
    exit 1
fi
