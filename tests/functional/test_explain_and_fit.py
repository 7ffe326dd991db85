"""GET /berth/explain/allocation_candidates and GET /berth/fit over HTTP,
on every database: the reports, their 400s (the same as
/allocation_candidates), policy, the DEBUG summary of an empty answer,
and fit's count checked by real claims.

Covers ``berth.api.handlers.explain``, ``berth.api.handlers.fit`` and
``berth.cli.explain``, over ``berth.domain.allocation_candidate.explain``
and ``.fit``."""

from __future__ import annotations

import logging
import subprocess
import sys
import uuid as uuidlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from support.numbered_providers import (
    AGG,
    allocate,
    candidates,
    inventory,
    pool_world,
    provider,
    traits,
    uuid,
)
from support.plain_words import plain_line
from tests.conftest import Client

EXPLAIN = "/berth/explain/allocation_candidates"


def explain(client: Client, query: str) -> dict[str, Any]:
    resp = client.get(EXPLAIN + "?" + query)
    assert resp.status_code == 200, resp.text
    return resp.json()  # type: ignore[no-any-return]


def fit(client: Client, query: str) -> dict[str, Any]:
    resp = client.get("/berth/fit?" + query)
    assert resp.status_code == 200, resp.text
    return resp.json()  # type: ignore[no-any-return]


def three_hosts(client: Client) -> None:
    """Host 1 is short of VCPU, host 2 lacks the trait, host 3 serves."""
    for n in (1, 2, 3):
        provider(client, n)
        inventory(client, uuid(n), VCPU=4, MEMORY_MB=2048)
    allocate(client, uuid(1), VCPU=3)
    traits(client, uuid(1), "CUSTOM_FAST")
    traits(client, uuid(3), "CUSTOM_FAST")


def test_explain_counts_reasons_with_examples(client: Client) -> None:
    three_hosts(client)
    body = explain(client, "resources=VCPU:2&required=CUSTOM_FAST")
    assert body["trees"] == {"considered": 3, "with_candidates": 1, "excluded": 2}
    assert body["reasons"] == [
        {
            "reason": "capacity",
            "trees": 1,
            "resources": [{"group": "", "resource_class": "VCPU", "needed": 2, "max_free": 1}],
            "examples": [
                {
                    "tree": uuid(1),
                    "tree_name": "rp1",
                    "reason": "capacity",
                    "group": "",
                    "resource_class": "VCPU",
                    "needed": 2,
                    "free": 1,
                    "providers": [uuid(1)],
                    "provider_names": ["rp1"],
                }
            ],
        },
        {
            "reason": "trait_missing",
            "trees": 1,
            "examples": [
                {
                    "tree": uuid(2),
                    "tree_name": "rp2",
                    "reason": "trait_missing",
                    "group": "",
                    "traits": ["CUSTOM_FAST"],
                    "providers": [uuid(2)],
                    "provider_names": ["rp2"],
                }
            ],
        },
    ]


def test_explain_names_each_tree_once_per_reason(client: Client) -> None:
    # Host 1 is short of both VCPU and memory: two faults of one kind,
    # one tree excluded for it, and so one example.
    three_hosts(client)
    allocate(client, uuid(1), MEMORY_MB=2000)
    allocate(client, uuid(2), VCPU=3, MEMORY_MB=2000)
    body = explain(client, "resources=VCPU:2,MEMORY_MB:100")
    (capacity,) = body["reasons"]
    assert capacity["trees"] == 2
    assert [e["tree"] for e in capacity["examples"]] == [uuid(1), uuid(2)]
    assert {(r["resource_class"], r["max_free"]) for r in capacity["resources"]} == {
        ("VCPU", 1),
        ("MEMORY_MB", 48),
    }


def test_explain_one_tree(client: Client) -> None:
    three_hosts(client)
    provider(client, 4, parent=2)
    inventory(client, uuid(4), SRIOV_NET_VF=2)
    query = (
        "resources=VCPU:1&resources1=SRIOV_NET_VF:4"
        "&required=CUSTOM_FAST&group_policy=none&explain_tree=%s"
    )
    tree = explain(client, query % uuid(4))["tree"]
    assert tree["root_provider_uuid"] == uuid(2)
    assert tree["candidate"] is False
    # Host 2 itself has no VF: its child, which has too few, is the
    # cause, not the host.
    assert tree["root_provider_name"] == "rp2"
    assert tree["reasons"] == [
        {
            "reason": "capacity",
            "group": "1",
            "resource_class": "SRIOV_NET_VF",
            "needed": 4,
            "free": 2,
            "providers": [uuid(4)],
            "provider_names": ["rp4"],
        },
        {
            "reason": "trait_missing",
            "group": "",
            "traits": ["CUSTOM_FAST"],
            "providers": [uuid(2)],
            "provider_names": ["rp2"],
        },
    ]
    other = explain(client, query % uuid(3))["tree"]
    assert other == {
        "root_provider_uuid": uuid(3),
        "root_provider_name": "rp3",
        "candidate": False,
        "reasons": [
            {
                "reason": "no_inventory",
                "group": "1",
                "resource_class": "SRIOV_NET_VF",
                "providers": [uuid(3)],
                "provider_names": ["rp3"],
            }
        ],
    }


def test_explain_merge_reasons(client: Client) -> None:
    """Both groups fit alone; together, isolation keeps the tree out."""
    provider(client, 1)
    inventory(client, uuid(1), VCPU=8)
    query = "resources1=VCPU:1&resources2=VCPU:1&group_policy=isolate"
    body = explain(client, query + "&explain_tree=" + uuid(1))
    assert body["tree"]["reasons"] == [
        {"reason": "isolate", "group": None, "providers": [], "provider_names": []}
    ]
    assert candidates(client, query.replace("isolate", "none"))["allocation_requests"]


def test_explain_sharing_and_aggregates(client: Client) -> None:
    pool_world(client)
    other = "5e9a2b1c-0000-4000-8000-00000000000b"
    body = explain(client, "resources=VCPU:1&member_of=!" + AGG + "&explain_tree=" + uuid(1))
    assert body["tree"]["reasons"] == [
        {
            "reason": "aggregate_forbidden",
            "group": "",
            "aggregate": AGG,
            "providers": [uuid(1)],
            "provider_names": ["rp1"],
        }
    ]
    # Taking host 1 out of the aggregate would also cut it off from the
    # pool's disk: explain says so.
    body = explain(
        client, "resources=VCPU:1,DISK_GB:10&member_of=!" + AGG + "&explain_tree=" + uuid(1)
    )
    assert [r["reason"] for r in body["tree"]["reasons"]] == ["no_inventory", "aggregate_forbidden"]
    body = explain(client, "resources=VCPU:1,DISK_GB:10&member_of=" + other)
    assert body["trees"]["with_candidates"] == 0
    assert [r["reason"] for r in body["reasons"]] == ["no_inventory", "aggregate_missing"]


def test_explain_blames_the_numa_node_not_the_root(client: Client) -> None:
    """The walkthrough's tree: disk on the root, VCPU and memory on two
    NUMA children. Short of VCPU, the children are the cause; the root,
    which has no VCPU at all, is not."""
    provider(client, 1)
    inventory(client, uuid(1), DISK_GB=1000)
    for n in (2, 3):
        provider(client, n, parent=1)
        inventory(client, uuid(n), VCPU=64, MEMORY_MB=65536)
    body = explain(client, "resources=VCPU:100,MEMORY_MB:8192&explain_tree=" + uuid(1))
    assert body["tree"]["reasons"] == [
        {
            "reason": "capacity",
            "group": "",
            "resource_class": "VCPU",
            "needed": 100,
            "free": 64,
            "providers": [uuid(2), uuid(3)],
            "provider_names": ["rp2", "rp3"],
        }
    ]
    assert [r["reason"] for r in body["reasons"]] == ["capacity"]


def test_explain_blames_the_sharing_pool_for_its_disk(client: Client) -> None:
    """The pool, short of disk, is the cause, not the hosts that have no
    disk; a host short of memory is, not the pool that has none."""
    pool_world(client)
    body = explain(client, "resources=VCPU:1,DISK_GB:2000")
    # The pool's own tree lacks VCPU too; every tree lacks the pool's disk.
    assert [(r["reason"], r["trees"]) for r in body["reasons"]] == [
        ("no_inventory", 1),
        ("capacity", 3),
    ]
    assert [
        (e["tree_name"], e["resource_class"], e["provider_names"])
        for e in body["reasons"][1]["examples"]
    ] == [("rp1", "DISK_GB", ["rp3"]), ("rp2", "DISK_GB", ["rp3"]), ("rp3", "DISK_GB", ["rp3"])]
    body = explain(client, "resources=MEMORY_MB:8192,DISK_GB:10&explain_tree=" + uuid(1))
    assert body["tree"]["reasons"] == [
        {
            "reason": "capacity",
            "group": "",
            "resource_class": "MEMORY_MB",
            "needed": 8192,
            "free": 4096,
            "providers": [uuid(1)],
            "provider_names": ["rp1"],
        }
    ]


@pytest.mark.parametrize(
    "query",
    [
        "resources=VCPU:0",
        "resources=NOPE:1",
        "required=CUSTOM_X",
        "resources=VCPU:1&required=CUSTOM_UNKNOWN",
        "resources=VCPU:1&limit=0",
        "resources=VCPU:1&bogus=1",
        "resources1=VCPU:1&resources2=VCPU:1",
    ],
)
def test_bad_queries_get_the_same_400(client: Client, query: str) -> None:
    expected = client.get("/allocation_candidates?" + query)
    assert expected.status_code == 400
    for path in (EXPLAIN, "/berth/fit"):
        resp = client.get(path + "?" + query)
        assert resp.status_code == 400, (path, resp.text)
        got = resp.json()["errors"][0]
        want = expected.json()["errors"][0]
        assert (got["detail"], got["code"]) == (want["detail"], want["code"])


def test_explain_tree_errors(client: Client) -> None:
    provider(client, 1)
    bad = client.get(EXPLAIN + "?resources=VCPU:1&explain_tree=nope")
    assert bad.status_code == 400
    unknown = client.get(EXPLAIN + "?resources=VCPU:1&explain_tree=" + uuid(9))
    assert unknown.status_code == 404
    assert uuid(9) in unknown.json()["errors"][0]["detail"]


def test_admin_only(app: Any) -> None:
    with Client(app, token="someone") as user:
        for path in (EXPLAIN, "/berth/fit"):
            resp = user.get(path + "?resources=VCPU:1")
            assert resp.status_code == 403, resp.text
            assert "berth:" in resp.json()["errors"][0]["detail"]
    with Client(app, version="1.9") as old:
        assert old.get("/berth/fit?resources=VCPU:1").status_code == 404


def test_empty_answer_logs_one_debug_summary(client: Client, caplog: Any) -> None:
    three_hosts(client)
    logger = "berth.api.handlers.allocation_candidate"
    with caplog.at_level(logging.DEBUG, logger=logger):
        assert not candidates(client, "resources=VCPU:5")["allocation_requests"]
        candidates(client, "resources=VCPU:1")
    lines = [r.getMessage() for r in caplog.records if r.name == logger]
    assert lines == [
        "no allocation candidates for resources=VCPU:5: 3 trees "
        "considered, 0 give a candidate; excluded by capacity 3"
    ]


def claim_until_none(client: Client, query: str) -> int:
    """Claim the first candidate, as a scheduler does, until none."""
    claims = 0
    while True:
        found = candidates(client, query + "&limit=1")["allocation_requests"]
        if not found:
            return claims
        body = {
            "allocations": found[0]["allocations"],
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": None,
            "consumer_type": "INSTANCE",
        }
        resp = client.put("/allocations/%s" % uuidlib.uuid4(), json=body)
        assert resp.status_code == 204, resp.text
        claims += 1


def test_fit_equals_real_claims(client: Client) -> None:
    pool_world(client)
    provider(client, 4)
    inventory(client, uuid(4), VCPU=2, MEMORY_MB=512, DISK_GB=40)
    query = "resources=VCPU:2,MEMORY_MB:512,DISK_GB:300"
    body = fit(client, query)
    # The pool's 1000 GB serve three 300 GB copies to hosts 1 and 2 (host
    # 1 first, in uuid order); host 4's own 40 GB serve none.
    assert body == {
        "total": {"placed": 3, "upper_bound": 3, "exact": True},
        "complete": True,
        "trees": [
            {
                "root_provider_uuid": uuid(1),
                "root_provider_name": "rp1",
                "placed": 3,
                "upper_bound": 3,
                "exact": True,
            },
            {
                "root_provider_uuid": uuid(2),
                "root_provider_name": "rp2",
                "placed": 0,
                "upper_bound": 3,
                "exact": False,
            },
        ],
        # An aggregate has no name: its first member trees, by name.
        "aggregates": [
            {
                "aggregate": AGG,
                "member_trees": ["rp1", "rp2", "rp3"],
                "placed": 3,
                "upper_bound": 3,
                "exact": True,
            }
        ],
    }
    assert claim_until_none(client, query) == 3
    after = fit(client, query)
    assert after["total"] == {"placed": 0, "upper_bound": 0, "exact": True}
    assert after["trees"] == [] and after["aggregates"] == []


def test_fit_respects_units_and_traits(client: Client) -> None:
    for n in (1, 2):
        provider(client, n)
    body = {
        "resource_provider_generation": 0,
        "inventories": {"VCPU": {"total": 16, "step_size": 4, "max_unit": 8}},
    }
    assert client.put("/resource_providers/%s/inventories" % uuid(1), json=body).status_code == 200
    inventory(client, uuid(2), VCPU=16)
    traits(client, uuid(2), "CUSTOM_SLOW")
    query = "resources=VCPU:4&required=!CUSTOM_SLOW"
    assert fit(client, query)["total"] == {"placed": 4, "upper_bound": 4, "exact": True}
    assert claim_until_none(client, query) == 4


def test_cli_explain_and_fit(tmp_path: Path) -> None:
    conf = tmp_path / "placement.conf"
    conf.write_text(
        "[api]\nauth_strategy = noauth2\n[placement_database]\n"
        "connection = sqlite:///%s\n" % (tmp_path / "p.sqlite")
    )
    berth = [sys.executable, "-m", "berth.cli"]

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [*berth, *args, "--config-file", str(conf)], capture_output=True, text=True, timeout=120
        )

    assert run("db", "sync").returncode == 0
    setup = (
        "import sys\n"
        "from berth import conf as c\n"
        "from berth.direct import PlacementDirect\n"
        "with PlacementDirect(c.load(sys.argv[1:]), microversion='latest')"
        " as h:\n"
        "    h.post('/resource_providers', json={'name': 'h', 'uuid': %r})\n"
        "    h.put('/resource_providers/%s/inventories', json={"
        "'resource_provider_generation': 0,"
        " 'inventories': {'VCPU': {'total': 4}}})\n" % (uuid(1), uuid(1))
    )
    subprocess.run(
        [sys.executable, "-c", setup, "--config-file", str(conf)], check=True, timeout=120
    )
    out = run("explain", "resources=VCPU:8")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[:4] == [
        "1 trees considered, 0 give a candidate, 1 excluded",
        "  capacity: 1 tree",
        "    group '' VCPU: needed 8, most free 4",
        '    e.g. tree h (%s): group="" resource_class=VCPU needed=8 '
        "free=4 providers=h (%s)" % (uuid(1), uuid(1)),
    ]
    out = run("fit", "resources=VCPU:1")
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines()[0] == "total: 4 (exact)"
    out = run("fit", "resources=VCPU:0")
    assert out.returncode == 1
    assert out.stderr.strip() == (
        "berth: error: Requested resource VCPU requires amount >= 1. Got: 0."
    )


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (
            ("fit", "resources=VCPU:4&limit=abc"),
            "limit must be a whole number from 1 up, not 'abc'",
        ),
        (
            ("explain", "resources=VCPU:1", "--tree", "not-a-uuid"),
            "--tree takes a provider uuid, not 'not-a-uuid'",
        ),
        (
            ("fit", "VCPU:4"),
            "expected a query such as resources=VCPU:4,MEMORY_MB:2048; got 'VCPU:4'",
        ),
        (
            ("fit", "resources=VCPUS:2"),
            "Invalid resource class in resources "
            "parameter: No such resource class VCPUS (did you mean VCPU?).",
        ),
        (("explain", "resources=VCPU:1&required=CUSTOM_FAST"), "No such trait(s): CUSTOM_FAST."),
        (
            ("explain", "resources=VCPU:1&required=HW_CPU_X86_AVX3"),
            "No such trait(s): HW_CPU_X86_AVX3 (did you mean HW_CPU_X86_AVX?).",
        ),
    ],
)
def test_cli_errors_in_plain_words(
    cli_world: Callable[..., str], args: tuple[str, ...], line: str
) -> None:
    assert plain_line(cli_world(*args)) == "berth: error: " + line


def test_cli_fit_names_trees_and_aggregates(
    cli_world: Callable[..., str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_world("fit", "resources=VCPU:1") == ""
    assert capsys.readouterr().out.splitlines() == [
        "total: 8 (exact)",
        "  tree h1 (%s): 4 (exact)" % uuid(1),
        "  tree h2 (%s): 4 (exact)" % uuid(2),
        "  aggregate with h1, h2 (%s): 8 (exact)" % AGG,
    ]
