"""The calls update_from_provider_tree makes for each kind of change."""

from __future__ import annotations

from typing import Any

import pytest

from berth.client import ProviderTree
from berth.client.exceptions import PlacementAPIError
from berth.client.flush import Flush, reshape_allocations
from berth.client.http import Connection

ROOT = "11111111-1111-1111-1111-111111111111"
CHILD = "22222222-2222-2222-2222-222222222222"


class Recorder:
    """Stands in for ReportClient._call: records and answers like
    Placement would (generation + 1 per write)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, Any]] = []

    def __call__(self, method: str, path: str, version: str = "1.36",
                 body: Any = None, ok: tuple[int, ...] = (200,)) -> Any:
        self.calls.append((method, path, body))
        if method == "POST" and path == "/resource_providers":
            return {"generation": 0}
        if isinstance(body, dict) and "resource_provider_generation" in body:
            return {"resource_provider_generation":
                    body["resource_provider_generation"] + 1}
        return {"generation": 1}

    def summary(self) -> list[tuple[str, str]]:
        return [(m, p) for m, p, _ in self.calls]


def _old() -> ProviderTree:
    tree = ProviderTree()
    tree.new_root("node", ROOT, generation=5)
    tree.update_inventory(ROOT, {"VCPU": {"total": 8}, "VGPU": {"total": 4}})
    tree.update_traits(ROOT, ["HW_CPU_X86_AVX"])
    return tree


def _flush(old: ProviderTree, new: ProviderTree,
           allocations: Any = None) -> tuple[Recorder, Flush]:
    rec = Recorder()
    flush = Flush(rec, old, new, lambda roots: {ROOT: 9, CHILD: 3})
    flush.run(old.compare(new), allocations)
    return rec, flush


def test_no_change_no_call() -> None:
    old = _old()
    rec, flush = _flush(old, old.snapshot())
    assert rec.calls == [] and flush.writes == 0


def test_inventory_change_is_one_put_with_cached_generation() -> None:
    old = _old()
    new = old.snapshot()
    new.update_inventory(ROOT, {"VCPU": {"total": 16}})
    rec, flush = _flush(old, new)
    assert rec.summary() == [("PUT", "/resource_providers/%s/inventories"
                              % ROOT)]
    body = rec.calls[0][2]
    assert body["resource_provider_generation"] == 5
    assert body["inventories"]["VCPU"]["total"] == 16
    assert flush.result().data(ROOT).generation == 6
    assert new.data(ROOT).generation == 6  # the caller's tree follows


def test_new_child_created_before_its_inventory_and_custom_trait() -> None:
    old = _old()
    new = old.snapshot()
    new.new_child("node_gpu0", ROOT, CHILD)
    new.update_inventory(CHILD, {"VGPU": {"total": 4}})
    new.update_traits(CHILD, ["CUSTOM_PGPU"])
    rec, _ = _flush(old, new)
    assert rec.summary() == [
        ("POST", "/resource_providers"),
        ("PUT", "/resource_providers/%s/inventories" % CHILD),
        ("PUT", "/traits/CUSTOM_PGPU"),
        ("PUT", "/resource_providers/%s/traits" % CHILD)]
    assert rec.calls[0][2] == {"uuid": CHILD, "name": "node_gpu0",
                               "parent_provider_uuid": ROOT}
    assert rec.calls[1][2]["resource_provider_generation"] == 0


def test_removed_providers_deleted_children_first_and_last() -> None:
    old = _old()
    old.new_child("a", ROOT, CHILD)
    grand = old.new_child("b", CHILD)
    new = old.snapshot()
    new.remove(CHILD)
    new.update_aggregates(ROOT, ["33333333-3333-3333-3333-333333333333"])
    rec, _ = _flush(old, new)
    assert rec.summary() == [
        ("PUT", "/resource_providers/%s/aggregates" % ROOT),
        ("DELETE", "/resource_providers/%s" % grand),
        ("DELETE", "/resource_providers/%s" % CHILD)]


def test_reshape_sends_inventories_and_allocations_in_one_call() -> None:
    old = _old()
    new = old.snapshot()
    new.new_child("node_gpu0", ROOT, CHILD)
    new.move_inventory(ROOT, CHILD, "VGPU")
    allocations = {"c1": {
        "allocations": {CHILD: {"generation": 7, "resources": {"VGPU": 2}},
                        ROOT: {"resources": {"VCPU": 0}}},
        "project_id": "p", "user_id": "u", "consumer_generation": 1}}
    rec, flush = _flush(old, new, allocations)
    assert rec.summary() == [("POST", "/resource_providers"),
                             ("POST", "/reshaper")]
    body = rec.calls[1][2]
    assert set(body["inventories"]) == {ROOT, CHILD}
    assert body["inventories"][ROOT]["resource_provider_generation"] == 5
    assert body["inventories"][CHILD]["resource_provider_generation"] == 0
    # Generations echoed by GET and zero amounts are left out.
    assert body["allocations"] == {"c1": {
        "allocations": {CHILD: {"resources": {"VGPU": 2}}},
        "project_id": "p", "user_id": "u", "consumer_generation": 1}}
    # After the 204, generations come from a fresh read.
    assert flush.result().data(ROOT).generation == 9


def test_reshape_without_inventory_change_restates_the_root() -> None:
    old = _old()
    rec, _ = _flush(old, old.snapshot(), {})
    assert rec.summary() == [("POST", "/reshaper")]
    assert list(rec.calls[0][2]["inventories"]) == [ROOT]


def test_reshape_allocations_version_and_validation() -> None:
    typed = {"c": {"allocations": {}, "project_id": "p", "user_id": "u",
                   "consumer_generation": 2, "consumer_type": "INSTANCE"}}
    body, version = reshape_allocations(typed)
    assert version == "1.38" and body["c"]["consumer_type"] == "INSTANCE"
    untyped = {"c": {"allocations": {}, "project_id": "p", "user_id": "u"}}
    body, version = reshape_allocations(untyped)
    assert version == "1.30" and body["c"]["consumer_generation"] is None
    with pytest.raises(ValueError):
        reshape_allocations({"c": {"allocations": {}}})


class FakeResponse:
    def __init__(self, status: int, body: str) -> None:
        self.status_code, self.text = status, body

    def json(self) -> Any:
        import json
        return json.loads(self.text)


class FakeSession:
    """keystoneauth's Session.request signature, recorded."""

    def __init__(self, response: FakeResponse) -> None:
        self.response = response
        self.seen: list[tuple[Any, ...]] = []

    def request(self, url: str, method: str, **kw: Any) -> FakeResponse:
        self.seen.append((url, method, kw))
        return self.response


def test_keystoneauth_session_gets_microversion_and_endpoint_filter() -> None:
    session = FakeSession(FakeResponse(200, '{"x": 1}'))
    assert Connection(session).call("GET", "/traits", "1.6") == {"x": 1}
    url, method, kw = session.seen[0]
    assert (url, method, kw["microversion"]) == ("/traits", "GET", "1.6")
    assert kw["endpoint_filter"]["service_type"] == "placement"
    assert kw["raise_exc"] is False


def test_error_body_becomes_placement_api_error() -> None:
    body = ('{"errors": [{"status": 409, "code": '
            '"placement.concurrent_update", "detail": "gen conflict"}]}')
    session = FakeSession(FakeResponse(409, body))
    with pytest.raises(PlacementAPIError) as info:
        Connection(session).call("PUT", "/x", "1.20", {})
    assert info.value.is_conflict and info.value.detail == "gen conflict"
