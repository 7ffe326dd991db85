#!/bin/bash
# `make image`: the Berth image, from this checkout.
#
#   deploy/container/build.sh
#
# 1. wheels of Berth and of all its dependencies, built on this machine by
#    pip (PyPI, or the index pip is configured with; PIP_CONSTRAINT pins
#    versions, e.g. OpenStack's upper-constraints.txt), into build/image/;
# 2. the base image, when it is the local one and missing (base.sh);
# 3. `podman build` of deploy/container/Containerfile, offline: the
#    wheels are installed with --no-index.
#
# Settings (environment):
#   IMAGE   the image to make            (localhost/berth:latest)
#   BASE    the image to build FROM      (localhost/berth-base:bookworm)
#   PYTHON  the Python that builds the wheels: the image's minor version,
#           3.11 with Debian bookworm    (.venv/bin/python, else python3)
#   REBUILD_BASE=1  rebuild the local base image even when present
#   NETWORK the build's network: none with the local base, else host (a
#           registry's BASE without python3 installs it with apt-get)
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
. "$here/podman-env.sh"

IMAGE=${IMAGE:-localhost/berth:latest}
LOCAL_BASE=localhost/berth-base:bookworm
BASE=${BASE:-$LOCAL_BASE}
# The local base has python3: the build needs no network at all.
if [ "$BASE" = "$LOCAL_BASE" ]; then NETWORK=${NETWORK:-none}; fi
NETWORK=${NETWORK:-host}
PY_MINOR=${PY_MINOR:-3.11}
if [ -z "${PYTHON:-}" ]; then
    PYTHON=python3
    [ -x "$root/.venv/bin/python" ] && PYTHON=$root/.venv/bin/python
fi

stamp() { echo "build.sh: $(date -u +%H:%M:%S) $*"; }

have=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
if [ "$have" != "$PY_MINOR" ]; then
    echo "build.sh: $PYTHON is Python $have; the image's is $PY_MINOR and" \
         "binary wheels must match it: PYTHON=python$PY_MINOR $0" >&2
    exit 1
fi

context=$root/build/image
stamp "wheels of berth and its dependencies ($PYTHON) into $context/wheels"
rm -rf "$context"
mkdir -p "$context/wheels"
# The wheel of the checkout is built from a copy, so that setuptools'
# build/ and egg-info folders stay out of the working tree.
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
# What the wheel is made of (pyproject.toml, README.md, src/): the files
# git knows or would add, as they are in the working tree.
while IFS= read -r -d '' file; do
    [ -f "$root/$file" ] && printf '%s\0' "$file"
done < <(git -C "$root" ls-files -z --cached --others --exclude-standard \
             -- pyproject.toml README.md 'LICENSE*' src) \
    | (cd "$root" && xargs -0 cp --parents -t "$src")
# (Without the warnings of find-links folders that lack a package.)
"$PYTHON" -m pip wheel --quiet --disable-pip-version-check \
    --wheel-dir "$context/wheels" "$src" \
    2> >(grep -v 'is ignored: it is neither a file nor a directory' >&2)
cp "$here/Containerfile" "$here/healthcheck.py" "$context/"
echo "build.sh: $(find "$context/wheels" -name '*.whl' | wc -l) wheels," \
     "$(du -sh "$context/wheels" | cut -f1)"

id_of() { $PODMAN image inspect --format '{{.Id}}' "$1" 2>/dev/null || true; }
old_base=$(id_of "$BASE")
if [ "$BASE" = "$LOCAL_BASE" ]; then
    if [ -n "${REBUILD_BASE:-}" ] || ! $PODMAN image exists "$BASE"; then
        stamp "base image $BASE (base.sh)"
        "$here/base.sh" "$BASE"
    fi
fi

version=$(find "$context/wheels" -name 'berth-*.whl' -printf '%f\n' \
    | sed -E 's/^berth-([^-]+)-.*/\1/')
stamp "image $IMAGE (berth $version) FROM $BASE"
old=$(id_of "$IMAGE")
# --layers=false: no intermediate images left behind (the build stage's
# included); the docker format keeps the HEALTHCHECK (OCI has none).
$PODMAN build --format docker --layers=false --network "$NETWORK" \
    --build-arg BASE="$BASE" --build-arg VERSION="$version" \
    --tag "$IMAGE" --file "$context/Containerfile" "$context"
# The images replaced: the previous image, then the base it was built on
# when base.sh made a new one (base.sh could not remove it then).
for replaced in "$old:$(id_of "$IMAGE")" "$old_base:$(id_of "$BASE")"; do
    if [ -n "${replaced%%:*}" ] && [ "${replaced%%:*}" != "${replaced#*:}" ]; then
        $PODMAN rmi "${replaced%%:*}" >/dev/null 2>&1 || true
    fi
done
stamp "built $IMAGE: $($PODMAN image inspect --format '{{.Size}}' "$IMAGE" \
    | awk '{printf "%.0f MB", $1 / 1e6}')"
