"""The hostile-input campaign (issue 13): every write endpoint at every
microversion range, with every mutation of a valid body; hostile path
segments and query values for every route; and bodies generated from the
handlers' own JSON Schemas. Three invariants: no 5xx, every error in the
Placement format, and after every accepted write every read endpoint
still answers 2xx.

Runs on SQLite and PostgreSQL in the default run and on MariaDB in the
stress run (``-m stress``), each in well under a minute.

Covers every route of ``berth.api.routes`` and the schemas of
``berth.api.schemas``; the requests and mutations are ``support/campaign.py``.
"""

from __future__ import annotations

import os
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from berth.api.openapi_document.operations import OPERATIONS as DESCRIBED
from berth.api.routes import ROUTES
from support import campaign as cm

#: Mutations tried per template and microversion: a fixed sample
#: (BERTH_CAMPAIGN_SEED varies it) of 30 in the default run and 120 in the
#: stress run; 0 tries them all (several thousand per template).
LIMIT = int(os.environ.get("BERTH_CAMPAIGN_LIMIT", "30"))
STRESS_LIMIT = int(os.environ.get("BERTH_CAMPAIGN_STRESS_LIMIT", "120"))
SEED = int(os.environ.get("BERTH_CAMPAIGN_SEED", "13"))
#: Requests drawn per operation from the OpenAPI document.
EXAMPLES = int(os.environ.get("BERTH_CAMPAIGN_EXAMPLES", "6"))


#: Every campaign test runs twice: sampled in the default run (SQLite and
#: PostgreSQL), in full in the stress run (MariaDB).
FULL = pytest.mark.parametrize(
    "full",
    [pytest.param(False, id="sampled"), pytest.param(True, id="full", marks=pytest.mark.stress)],
)


def _campaign_for(backend, campaign_world, client, full):
    if backend == "mysql" and not full:
        pytest.skip("MariaDB runs the campaign in the stress run")
    if full and backend != "mysql":
        pytest.skip("SQLite and PostgreSQL run the campaign by default")
    return cm.Campaign(client, campaign_world)


def _report(camp, writes=True):
    # A write campaign whose writes never land tests nothing.
    assert camp.accepted > 0 or not writes
    assert not camp.failures, "%d of %d requests broke an invariant:\n%s" % (
        len(camp.failures),
        camp.sent,
        "\n".join(camp.failures[:30]),
    )


@FULL
@pytest.mark.parametrize(
    "template", cm.WRITES, ids=lambda w: "%s %s %s" % (w.method, w.path, "/".join(w.versions))
)
def test_mutated_bodies(backend, campaign_world, client, template, full):
    camp = _campaign_for(backend, campaign_world, client, full)
    for i, version in enumerate(template.versions):
        newest = i == len(template.versions) - 1
        camp.write(
            template,
            cm.HOSTILE if newest else cm.SHORT,
            version,
            (STRESS_LIMIT if full else LIMIT) or None,
            SEED,
        )
    _report(camp)


@FULL
def test_hostile_paths_and_queries(backend, campaign_world, client, full):
    camp = _campaign_for(backend, campaign_world, client, full)
    ctx = campaign_world
    for template, methods in ROUTES.items():
        if "{" not in template:
            continue
        for segment in cm.HOSTILE_SEGMENTS:
            path = template.replace("{uuid}", ctx.rp)
            for name in ("{uuid}", "{resource_class}", "{name}", "{consumer_uuid}"):
                if name in template:
                    path = template.replace("{uuid}", ctx.rp).replace(name, segment)
            for method in methods:
                raw = b"{}" if method in ("PUT", "POST") else None
                camp.send(method, path, "latest", raw, "segment", sweep=method != "DELETE")
    for path, params in cm.QUERIES:
        for key in params:
            for value in cm.HOSTILE_QUERY_VALUES:
                query = "&".join(
                    "%s=%s" % (k, value if k == key else v)
                    for k, v in params.items()
                    if v or k == key
                )
                for version in ("1.0", "1.17", "1.25", "1.33", "latest"):
                    camp.send("GET", "%s?%s" % (path, query), version, None, "query")
    _report(camp, writes=False)


@FULL
def test_hostile_version_headers(backend, campaign_world, client, full):
    camp = _campaign_for(backend, campaign_world, client, full)
    for value in [
        "placement 1.9999999999999999999",
        "placement 99.0",
        "placement -1.0",
        "placement 1.",
        "placement ",
        "placement",
        "placement 1.5, placement 1.6",
        "placement 0x1.0",
        "placement \t1.5",
        "compute 2.1",
        "placement 1.39 junk",
    ]:
        r = client.get("/resource_providers", headers={"openstack-api-version": value})
        camp.failures += cm.check_answer(r, "version %r" % value)
        camp.sent += 1
    _report(camp, writes=False)


#: Those the app serves (the watch route is another process's).
OPERATIONS = sorted(op for op in DESCRIBED if op[0] in ROUTES)


@FULL
@pytest.mark.parametrize("path,method", OPERATIONS, ids=["%s %s" % (m, p) for p, m in OPERATIONS])
def test_schema_generated_requests(
    backend, campaign_world, client, campaign_cases, path, method, full
):
    """Requests schemathesis draws from the document, half of them aimed
    at the world's own provider and consumer so that some writes land,
    at a drawn microversion."""
    camp = _campaign_for(backend, campaign_world, client, full)
    strategy = campaign_cases[path][method].as_strategy()
    own = {
        "uuid": campaign_world.rp,
        "consumer_uuid": campaign_world.consumer,
        "resource_class": "VCPU",
        "name": "CUSTOM_CAMPAIGN",
    }
    versions = st.sampled_from(["1.0", "1.14", "1.28", "1.30", "latest"])

    @settings(
        max_examples=EXAMPLES * (2 if full else 1),
        deadline=None,
        database=None,
        derandomize=True,
        suppress_health_check=list(HealthCheck),
    )
    @given(strategy, st.booleans(), versions)
    def run(case, aim, version):
        params = dict(case.path_parameters or {})
        if aim:
            params.update({k: v for k, v in own.items() if k in params})
        url = path.format(**params)
        if case.query:
            url += "?" + urlencode(case.query, doseq=True)
        body = case.body
        raw = None if body is None or type(body).__name__ == "NotSet" else cm.dumps(body)
        camp.send(method, url, version, raw, "generated")

    run()
    # Most generated writes miss (random uuids); the sweep ran for any hit.
    _report(camp, writes=False)
