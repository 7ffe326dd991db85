#!/bin/bash
# The local base image of the Berth image, built from Debian's packages
# (no container registry needed): a minimal Debian bookworm root file
# system with python3 (3.11) and its venv module, made by mmdebstrap and
# imported as a local image.
#
#   deploy/container/base.sh [IMAGE]     (default localhost/berth-base:bookworm)
#
# Needs root (or a working `mmdebstrap --mode=unshare`), mmdebstrap and
# podman: apt-get install mmdebstrap podman. The packages come from the
# host's Debian mirror (MIRROR, default http://deb.debian.org/debian).
# Elsewhere, the Containerfile builds FROM a registry's image instead
# (--build-arg BASE=docker.io/library/debian:bookworm-slim).
set -euo pipefail

IMAGE=${1:-localhost/berth-base:bookworm}
SUITE=${SUITE:-bookworm}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
SECURITY=${SECURITY:-http://deb.debian.org/debian-security}
. "$(dirname "$0")/podman-env.sh"
command -v mmdebstrap >/dev/null || {
    echo "base.sh: mmdebstrap is missing: apt-get install mmdebstrap" >&2
    exit 1
}

# essential: only the Essential: yes packages (no apt), plus what the
# image needs: python3 and venv (ensurepip's wheels, for the build
# stage), passwd (useradd), ca-certificates (Keystone and databases
# over TLS).
PACKAGES=python3,python3-venv,passwd,ca-certificates

tar=$(mktemp --suffix=.tar)
trap 'rm -f "$tar"' EXIT

# merged-usr: /bin, /lib and /sbin as links into /usr, made first, so
# that apt picks usr-is-merged and not the usrmerge tool (and its perl).
# No documentation, manual pages or translations (dpkg leaves them out as
# it unpacks; the copyright files stay), no apt lists or logs (the
# customize hook's "$1" is the root: mmdebstrap's shell expands it).
# shellcheck disable=SC2016
mmdebstrap --quiet --variant=essential --include="$PACKAGES" \
    --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
    --format=tar \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/lintian/*' \
    --customize-hook='rm -rf "$1"/var/cache/apt/* "$1"/var/lib/apt/lists/* "$1"/var/log/*' \
    "$SUITE" "$tar" \
    "deb $MIRROR $SUITE main" \
    "deb $MIRROR $SUITE-updates main" \
    "deb $SECURITY $SUITE-security main"

old=$($PODMAN image inspect --format '{{.Id}}' "$IMAGE" 2>/dev/null || true)
$PODMAN import \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/bash"]' \
    --message "Debian $SUITE with python3 (deploy/container/base.sh)" \
    --quiet "$tar" "$IMAGE" >/dev/null
# The image replaced, unless an image still builds on it.
new=$($PODMAN image inspect --format '{{.Id}}' "$IMAGE")
if [ -n "$old" ] && [ "$old" != "$new" ]; then
    $PODMAN rmi "$old" >/dev/null 2>&1 || true
fi
echo "base.sh: built $IMAGE: $($PODMAN image inspect --format '{{.Size}}' "$IMAGE" \
    | awk '{printf "%.0f MB", $1 / 1e6}')"
