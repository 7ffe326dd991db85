"""The docs stay true to the code: generated references match, and every
endpoint, microversion, error code and CLI command is documented."""

from __future__ import annotations

import re
from pathlib import Path

from berth.api import errors, microversion
from berth.api.routes import ROUTES
from berth.cli import docgen

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_config_reference_is_current():
    assert (DOCS / "config-reference.md").read_text() == docgen.config_reference(), (
        "run: python -m berth.cli.docgen config > docs/config-reference.md")


def test_cli_reference_is_current():
    assert (DOCS / "cli.md").read_text() == docgen.cli_reference(), (
        "run: python -m berth.cli.docgen cli > docs/cli.md")


def test_every_microversion_is_in_the_history():
    api = (DOCS / "api.md").read_text()
    for version in microversion.VERSIONS:
        assert re.search(r"^\| %s \|" % re.escape(version), api, re.M), version


def test_every_route_is_documented():
    api = (DOCS / "api.md").read_text()
    for template, methods in ROUTES.items():
        for method in methods:
            assert "`%s %s`" % (method, template) in api, (method, template)


def test_every_error_code_is_documented():
    api = (DOCS / "api.md").read_text()
    for code in errors.ALL_CODES:
        assert "`%s`" % code in api, code


def test_api_reference_is_current():
    assert (DOCS / "api-reference.md").read_text() == docgen.api_reference(), (
        "run: python -m berth.cli.docgen api > docs/api-reference.md")


def test_every_metric_is_documented():
    from berth.metrics import Metrics
    operations = (DOCS / "operations.md").read_text()
    for family in Metrics().registry.collect():
        name = family.name + ("_total" if family.type == "counter" else "")
        assert "`%s" % name in operations, name


def test_install_names_the_sqlalchemy_releases_the_fast_path_checks():
    from berth.db import connection
    ranges = " and ".join(
        "%d.%d.%d to %d.%d.%d" % (major, minor, first, major, minor, last)
        for (major, minor), (first, last) in sorted(connection.VERIFIED.items()))
    text = " ".join((DOCS / "install.md").read_text().split())
    assert "(%s)" % ranges in text


def test_install_lists_what_openstack_constraints_leave_free():
    """The table of "Installing beside OpenStack services" against the
    constraints files of the shared folder (beside the checkout, as in
    CI): each package it says neither file pins is in neither, and
    aiohttp is pinned by master only."""
    shared = DOCS.parents[1] / "shared" / "constraints"
    pinned = {}
    for release in ("master", "2026.1"):
        text = (shared / ("openstack-%s.txt" % release)).read_text()
        pinned[release] = {line.split("===")[0].lower().replace("_", "-")
                           for line in text.splitlines() if "===" in line}
    doc = (DOCS / "install.md").read_text()
    section = doc.split("### Installing beside OpenStack services")[1]
    rows = re.findall(r"^\| `([^`]+)`(?: and `([^`]+)`)?[^|]*\|[^|]*\| (\w[\w ]*) \|$",
                      section.split("###")[0], re.M)
    assert len(rows) == 4, rows
    for first, second, where in rows:
        for name in filter(None, (first.split(" ")[0], second)):
            expected = {"no": set(), "master only": {"master"}}[where]
            found = {release for release, names in pinned.items()
                     if name.lower() in names}
            assert found == expected, (name, found)
