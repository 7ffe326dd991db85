"""Nested providers: parents, roots, loops, re-parenting, deleting."""

from __future__ import annotations

import uuid as uuidlib
from typing import Any

import pytest

from berth.domain import errors, resource_provider

ROOT = "/resource_providers"


def _put_parent(client: Any, uuid: str, parent: str | None, version: str = "latest") -> Any:
    return client.at(version).put(
        "%s/%s" % (ROOT, uuid), json={"name": "rp-%s" % uuid[:8], "parent_provider_uuid": parent}
    )


def _show(client: Any, uuid: str) -> dict[str, Any]:
    return client.get("%s/%s" % (ROOT, uuid)).json()  # type: ignore[no-any-return]


def _detail(resp: Any) -> str:
    return resp.json()["errors"][0]["detail"]  # type: ignore[no-any-return]


def test_child_inherits_root(client: Any, tree: dict[str, str]) -> None:
    leaf = _show(client, tree["leaf"])
    assert leaf["parent_provider_uuid"] == tree["mid"]
    assert leaf["root_provider_uuid"] == tree["root"]


def test_self_parent_on_create(client: Any) -> None:
    me = str(uuidlib.uuid4())
    resp = client.post(ROOT, json={"name": "narcissus", "uuid": me, "parent_provider_uuid": me})
    assert resp.status_code == 400
    assert 'Unable to create resource provider "narcissus", %s:' % me in _detail(resp)
    assert "parent provider UUID cannot be same as UUID" in _detail(resp)


def test_unknown_parent(client: Any, tree: dict[str, str]) -> None:
    resp = client.post(ROOT, json={"name": "orphan", "parent_provider_uuid": str(uuidlib.uuid4())})
    assert resp.status_code == 400
    assert "parent provider UUID does not exist" in _detail(resp)
    resp = _put_parent(client, tree["other"], str(uuidlib.uuid4()))
    assert resp.status_code == 400
    assert "parent provider UUID does not exist" in _detail(resp)


@pytest.mark.parametrize("version", ["1.14", "latest"])
@pytest.mark.parametrize("new_parent", ["root", "mid", "leaf"])
def test_loops_are_refused(
    client: Any, tree: dict[str, str], version: str, new_parent: str
) -> None:
    resp = _put_parent(client, tree["root"], tree[new_parent], version)
    assert resp.status_code == 400
    assert "creating loop in the provider tree is not allowed." in _detail(resp)
    assert _show(client, tree["root"])["parent_provider_uuid"] is None


def test_mid_tree_loop_refused_with_reparenting(client: Any, tree: dict[str, str]) -> None:
    resp = _put_parent(client, tree["mid"], tree["leaf"])
    assert resp.status_code == 400
    assert "creating loop" in _detail(resp)


def test_reparent_and_unparent_refused_before_1_37(client: Any, tree: dict[str, str]) -> None:
    resp = _put_parent(client, tree["mid"], tree["other"], "1.36")
    assert resp.status_code == 400
    assert "re-parenting a provider is not currently allowed" in _detail(resp)
    resp = _put_parent(client, tree["mid"], None, "1.36")
    assert resp.status_code == 400
    assert "un-parenting a provider is not currently allowed" in _detail(resp)
    # Naming the current parent again is no change and allowed.
    assert _put_parent(client, tree["mid"], tree["root"], "1.36").status_code == 200


def test_root_may_gain_parent_before_1_37(client: Any, tree: dict[str, str]) -> None:
    resp = _put_parent(client, tree["other"], tree["leaf"], "1.14")
    assert resp.status_code == 200
    assert resp.json()["root_provider_uuid"] == tree["root"]


def test_reparent_moves_whole_subtree(client: Any, tree: dict[str, str]) -> None:
    resp = _put_parent(client, tree["mid"], tree["other"])
    assert resp.status_code == 200
    assert resp.json()["root_provider_uuid"] == tree["other"]
    leaf = _show(client, tree["leaf"])
    assert leaf["parent_provider_uuid"] == tree["mid"]
    assert leaf["root_provider_uuid"] == tree["other"]
    in_root = client.get(ROOT, params={"in_tree": tree["root"]}).json()
    assert [p["uuid"] for p in in_root["resource_providers"]] == [tree["root"]]


def test_unparent_makes_subtree_a_tree(client: Any, tree: dict[str, str]) -> None:
    resp = _put_parent(client, tree["mid"], None)
    assert resp.status_code == 200
    assert resp.json()["parent_provider_uuid"] is None
    assert resp.json()["root_provider_uuid"] == tree["mid"]
    assert _show(client, tree["leaf"])["root_provider_uuid"] == tree["mid"]
    # Moving it back under its old parent restores the old root.
    assert _put_parent(client, tree["mid"], tree["root"]).status_code == 200
    assert _show(client, tree["leaf"])["root_provider_uuid"] == tree["root"]


def test_put_without_parent_keeps_it(client: Any, tree: dict[str, str]) -> None:
    resp = client.at("1.36").put("%s/%s" % (ROOT, tree["mid"]), json={"name": "renamed"})
    assert resp.status_code == 200
    assert resp.json()["parent_provider_uuid"] == tree["root"]


def test_cannot_delete_parent(client: Any, tree: dict[str, str]) -> None:
    resp = client.delete("%s/%s" % (ROOT, tree["mid"]))
    assert resp.status_code == 409
    assert resp.json()["errors"][0]["code"] == ("placement.resource_provider.cannot_delete_parent")
    assert (
        "Unable to delete parent resource provider %s: It has child "
        "resource providers." % tree["mid"]
    ) in _detail(resp)
    # Leaves first, then the parents go.
    for name in ("leaf", "mid", "root"):
        assert client.delete("%s/%s" % (ROOT, tree[name])).status_code == 204
    assert [p["uuid"] for p in client.get(ROOT).json()["resource_providers"]] == [tree["other"]]


def test_domain_tree_helpers(db: Any) -> None:
    def build(conn: Any) -> dict[str, Any]:
        root = resource_provider.create_provider(conn, "r", str(uuidlib.uuid4()))
        kid = resource_provider.create_provider(conn, "k", str(uuidlib.uuid4()), root.uuid)
        grandkid = resource_provider.create_provider(conn, "g", str(uuidlib.uuid4()), kid.uuid)
        return {"root": root, "kid": kid, "grandkid": grandkid}

    rows = db.run(build)
    ids = {k: int(v.id) for k, v in rows.items()}
    assert db.read(lambda c: resource_provider.descendant_ids(c, ids["root"])) == {
        ids["kid"],
        ids["grandkid"],
    }
    loaded = db.read(lambda c: resource_provider.load_provider(c, rows["grandkid"].uuid))
    assert loaded.root_provider_uuid == rows["root"].uuid
    assert loaded.parent_provider_uuid == rows["kid"].uuid
    with pytest.raises(errors.NotFound):
        db.read(lambda c: resource_provider.load_provider(c, str(uuidlib.uuid4())))


def test_rejected_move_changes_nothing(db: Any) -> None:
    def build(conn: Any) -> tuple[str, str]:
        a = resource_provider.create_provider(conn, "a", str(uuidlib.uuid4()))
        b = resource_provider.create_provider(conn, "b", str(uuidlib.uuid4()), a.uuid)
        return a.uuid, b.uuid

    a, b = db.run(build)
    with pytest.raises(errors.BadRequest):
        db.run(
            lambda c: resource_provider.update_provider(c, a, "renamed", b, allow_reparenting=True)
        )
    row = db.read(lambda c: resource_provider.load_provider(c, a))
    assert (row.name, row.parent_provider_uuid) == ("a", None)


def test_parent_spelled_otherwise_is_unknown(client: Any, tree: dict[str, str]) -> None:
    # Upstream looks parents up exactly as written; a long spelling must
    # also not trouble a 36-character column on any backend.
    for spelling in ("urn:uuid:" + tree["root"], tree["root"].upper()):
        resp = client.post(ROOT, json={"name": "x", "parent_provider_uuid": spelling})
        assert resp.status_code == 400
        assert "parent provider UUID does not exist" in _detail(resp)
