"""The change feed's filters and policy (``GET /berth/changes``,
docs/change-feed.md): by kind, consumer, project and tree (several trees
at once, a provider moved out of one); a project reader sees its own
project's consumers only."""

from __future__ import annotations

import pytest

from berth.db import events
from berth.db.engine import Database
from support.change_feed import feed, position, two_trees
from tests.conftest import Client


def test_filters(client: Client) -> None:
    start = position(client)
    root, other, consumer = two_trees(client)
    kinds = [e["kind"] for e in feed(client, start, kind="inventories.set")]
    assert kinds == ["inventories.set"] * 2
    by_consumer = feed(client, start, consumer=consumer)
    assert [(e["kind"], e["subject"]) for e in by_consumer] == [
        (events.ALLOCATIONS_REPLACED, consumer)
    ]
    assert by_consumer[0]["new"]["project_id"] == "proj-a"
    assert by_consumer[0]["old"] is None
    by_project = feed(client, start, project="proj-b")
    assert [e["new"]["project_id"] for e in by_project] == ["proj-b"]
    tree = feed(client, start, tree=root)
    assert [e["kind"] for e in tree] == [
        events.PROVIDER_CREATED,
        events.PROVIDER_CREATED,
        events.INVENTORIES_SET,
        events.ALLOCATIONS_REPLACED,
    ]
    assert all(other not in str(e) for e in tree)


def test_a_tree_filter_names_several_trees(client: Client) -> None:
    """``tree=a,b``: the events of either tree (any provider of a tree
    names it), as one filter each would give them together."""
    start = position(client)
    root, other, _ = two_trees(client)
    third = client.post("/resource_providers", json={"name": "third"})
    assert third.status_code == 200
    child = [
        rp["uuid"]
        for rp in client.get("/resource_providers", params={"in_tree": root}).json()[
            "resource_providers"
        ]
        if rp["uuid"] != root
    ]
    both = feed(client, start, tree="%s,%s" % (child[0], other.upper()))
    alone = feed(client, start, tree=root) + feed(client, start, tree=other)
    assert sorted(e["position"] for e in both) == sorted(e["position"] for e in alone)
    assert len(both) == 7
    assert third.json()["uuid"] not in str(both)
    # A provider moved out of a tree is an event of that tree too.
    moved = client.put(
        "/resource_providers/%s" % child[0],
        json={"name": "child", "parent_provider_uuid": third.json()["uuid"]},
    )
    assert moved.status_code == 200, moved.text
    last = feed(client, start, tree=root)[-1]
    assert (last["kind"], last["subject"]) == (events.PROVIDER_UPDATED, child[0])
    for bad in ("%s,not-a-uuid" % root, ",".join([root] * 101), root + ","):
        resp = client.get("/berth/changes", params={"after": start, "tree": bad})
        assert resp.status_code == 400, (bad, resp.text)


@pytest.mark.parametrize("new_defaults", [False, True])
def test_a_project_reader_sees_its_own_consumers_only(db: Database, new_defaults: bool) -> None:
    from berth.api.app import create_app
    from tests.conftest import make_conf

    app = create_app(make_conf(oslo_policy__enforce_new_defaults=new_defaults), db)
    admin = Client(app)
    start = position(admin)
    _, _, consumer = two_trees(admin)
    reader = Client(app, token="alice:proj-a")
    reader.headers["x-roles"] = "reader"
    # Without its project, or with another one: refused.
    for params in ({"after": start}, {"after": start, "project": "proj-b"}):
        resp = reader.get("/berth/changes", params=params)
        assert resp.status_code == 403, resp.text
    got = feed(reader, start, project="proj-a")
    assert [(e["kind"], e["subject"]) for e in got] == [(events.ALLOCATIONS_REPLACED, consumer)]
    # Asking for provider events changes nothing: none are shown.
    assert feed(reader, start, project="proj-a", kind="provider.created") == []
    nobody = Client(app, token="bob:proj-a")
    nobody.headers["x-roles"] = "member-of-nothing"
    resp = nobody.get("/berth/changes", params={"after": start, "project": "proj-a"})
    assert resp.status_code == 403
