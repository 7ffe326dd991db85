"""The docs stay true to the code: generated references match, and every
endpoint, microversion, error code and CLI command is documented."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

from berth.api import errors, microversion
from berth.api.routes import API
from berth.cli import docgen

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_config_reference_is_current():
    assert (DOCS / "config-reference.md").read_text() == docgen.config_reference(), (
        "run: python -m berth.cli.docgen config > docs/config-reference.md"
    )


def test_cli_reference_is_current():
    assert (DOCS / "cli.md").read_text() == docgen.cli_reference(), (
        "run: python -m berth.cli.docgen cli > docs/cli.md"
    )


def test_every_microversion_is_in_the_history():
    api = (DOCS / "api.md").read_text()
    for version in microversion.VERSIONS:
        assert re.search(r"^\| %s \|" % re.escape(version), api, re.M), version


def test_every_route_is_documented():
    api = (DOCS / "api.md").read_text()
    for template, methods in API.items():
        for method in methods:
            assert "`%s %s`" % (method, template) in api, (method, template)


def test_every_error_code_is_documented():
    api = (DOCS / "api.md").read_text()
    for code in errors.ALL_CODES:
        assert "`%s`" % code in api, code


def test_api_reference_is_current():
    assert (DOCS / "api-reference.md").read_text() == docgen.api_reference(), (
        "run: python -m berth.cli.docgen api > docs/api-reference.md"
    )


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
        for (major, minor), (first, last) in sorted(connection.VERIFIED.items())
    )
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
        pinned[release] = {
            line.split("===")[0].lower().replace("_", "-")
            for line in text.splitlines()
            if "===" in line
        }
    doc = (DOCS / "install.md").read_text()
    section = doc.split("### Installing beside OpenStack services")[1]
    rows = re.findall(
        r"^\| `([^`]+)`(?: and `([^`]+)`)?[^|]*\|[^|]*\| (\w[\w ]*) \|$",
        section.split("###")[0],
        re.M,
    )
    assert len(rows) == 4, rows
    for first, second, where in rows:
        for name in filter(None, (first.split(" ")[0], second)):
            expected = {"no": set(), "master only": {"master"}}[where]
            found = {release for release, names in pinned.items() if name.lower() in names}
            assert found == expected, (name, found)


BENCH = DOCS.parent / "bench"


def _bench_results():
    """``bench/results.py`` as a module (bench/ is no package)."""
    spec = importlib.util.spec_from_file_location("bench_results", BENCH / "results.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_results_table_is_current():
    """The table in bench/README.md is what ``bench/results.py`` writes
    from ``bench/latest.json``: nobody edits figures by hand."""
    results = _bench_results()
    store = json.loads((BENCH / "latest.json").read_text())
    readme = (BENCH / "README.md").read_text()
    assert results.rewrite(readme, store) == readme, "run .venv/bin/python bench/results.py"
    # Every row says where its figure came from, and that page exists.
    for row in store["rows"]:
        assert (BENCH / row["source"].split("#")[0]).is_file(), row


def test_bench_results_record_replaces_one_measure(monkeypatch):
    results = _bench_results()
    monkeypatch.setattr(results, "machine", lambda: {"cpu": "X"})
    store = {"rows": [{"measure": "a", "berth": "1"}, {"measure": "b", "berth": "2"}]}
    args = results.main.__globals__["argparse"].Namespace(
        benchmark="run.py",
        measure="a",
        berth="0.5",
        upstream="5",
        higher_is_better=False,
        source="journal/x.md",
    )
    results.record(store, args)
    assert [r["measure"] for r in store["rows"]] == ["a", "b"]
    assert store["rows"][0]["berth"] == "0.5"
    assert results._ratio(store["rows"][0]) == "10.0x"
    assert store["machine"]["cpu"] == "X"


def test_bench_readme_is_a_guide_to_every_script():
    """bench/README.md stays a guide (the dated notes go to journal/)
    and names every script in bench/."""
    readme = (BENCH / "README.md").read_text()
    assert len(readme.splitlines()) <= 300
    for script in sorted(BENCH.glob("*.py")):
        assert "`%s`" % script.name in readme, script.name
