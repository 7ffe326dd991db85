"""Print pip constraints that pin every runtime dependency at its lower bound.

Reads ``[project] dependencies`` of pyproject.toml (the repository's, or the
file given as the first argument) and prints one ``name==lower`` line for
each, the lower bound being the version of its ``>=`` (or ``==``) clause:
``pip install -e . -c <(python3 .ci/lowest.py)`` then installs Berth with
each direct dependency at the lowest version it declares, the transitive
ones left free (.ci/matrix.sh lowest). Extras are dropped (pip refuses them
in constraints; ``psycopg[binary]`` pins psycopg-binary to psycopg's own
version). A dependency without a lower bound is an error: its lowest
version could not be tested.

``lowest.py --freeze``, run by a venv's python, prints ``name==version``
of each runtime dependency as installed: the test extras are installed
with it as constraints, so that they move none of them.

``lowest.py --installed CONSTRAINTS``, run by a venv's python, prints
each dependency's declared range, the version CONSTRAINTS pins it at (if
any) and the version installed, and fails if a pinned one is not the one
installed or an installed one is outside the declared range.

Standard library only for the pins, so that it runs before any venv exists.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

REQUIREMENT = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)\s*(\[[^\]]*\])?\s*([^;]*)(;.*)?$")
LOWER = re.compile(r"^(>=|==|~=)\s*([0-9][A-Za-z0-9.!+]*)$")


def lower_bounds(pyproject: Path) -> list[tuple[str, str]]:
    """(name, lowest version) of each runtime dependency, in file order."""
    with pyproject.open("rb") as f:
        deps = tomllib.load(f)["project"]["dependencies"]
    pins = []
    for dep in deps:
        m = REQUIREMENT.match(dep)
        if m is None:
            raise SystemExit("lowest.py: cannot read the requirement %r" % dep)
        name, spec = m.group(1), m.group(3)
        lows = [lm.group(2) for lm in (LOWER.match(c.strip()) for c in spec.split(",")) if lm]
        if len(lows) != 1:
            raise SystemExit("lowest.py: %r has no single lower bound (>=, == or ~=)" % dep)
        pins.append((name, lows[0]))
    return pins


def _normal(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def installed(pyproject: Path, constraints: Path) -> int:
    """Print the declared, pinned and installed version of each runtime
    dependency; 1 if any pinned version is not installed, or any installed
    one is outside the declared range."""
    from importlib import metadata

    from packaging.requirements import Requirement
    from packaging.version import Version

    pins: dict[str, str] = {}
    for line in constraints.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        req = Requirement(line.replace("===", "=="))
        if req.marker is None or req.marker.evaluate():
            pins[_normal(req.name)] = str(req.specifier).lstrip("=")
    with pyproject.open("rb") as f:
        declared = [Requirement(d) for d in tomllib.load(f)["project"]["dependencies"]]
    rows, bad = [], []
    for req in declared:
        try:
            have = metadata.version(req.name)
        except metadata.PackageNotFoundError:
            have = "-"
        pin = pins.get(_normal(req.name), "")
        ok = have != "-" and req.specifier.contains(have, prereleases=True)
        if pin and have != "-":
            ok = ok and Version(pin) == Version(have)
        rows.append((req.name, str(req.specifier), pin or "(free)", have,
                     "ok" if ok else "MISMATCH"))
        if not ok:
            bad.append(req.name)
    head = ("dependency", "declared", "pinned", "installed", "")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(5)]
    for row in [head, *rows]:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    if bad:
        print("lowest.py: not as pinned or outside the declared range: %s"
              % ", ".join(bad), file=sys.stderr)
        return 1
    return 0


def main(argv: list[str]) -> int:
    root = Path(__file__).resolve().parent.parent
    pyproject = root / "pyproject.toml"
    if len(argv) == 3 and argv[1] == "--installed":
        return installed(pyproject, Path(argv[2]))
    if argv[1:] == ["--freeze"]:
        from importlib import metadata
        for name, _ in lower_bounds(pyproject):
            print("%s==%s" % (name, metadata.version(name)))
        return 0
    if len(argv) > 1:
        pyproject = Path(argv[1])
    for name, version in lower_bounds(pyproject):
        print("%s==%s" % (name, version))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
