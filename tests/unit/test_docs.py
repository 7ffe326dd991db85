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
