"""The calls update_from_provider_tree makes for each kind of change."""

from __future__ import annotations

from typing import Any

import pytest

from berth.client import ProviderTree, normalize_inventory
from berth.client.exceptions import PlacementAPIError
from berth.client.flush import Flush, reshape_allocations
from berth.client.http import Connection

ROOT = "11111111-1111-1111-1111-111111111111"
CHILD = "22222222-2222-2222-2222-222222222222"


class Recorder:
    """Stands in for ReportClient._call: records and answers like
    Placement would (generation + 1 per write)."""

    def __init__(self, max_version: str = "1.39", fail: tuple[str, ...] = ()) -> None:
        self.calls: list[tuple[str, str, Any]] = []
        self.versions: list[str] = []
        self.max_version = max_version
        self.fail = fail

    def __call__(
        self,
        method: str,
        path: str,
        version: str = "1.36",
        body: Any = None,
        ok: tuple[int, ...] = (200,),
    ) -> Any:
        self.calls.append((method, path, body))
        self.versions.append(version)
        if (method + " " + path).startswith(self.fail):
            raise PlacementAPIError(method, path, 500, "injected")
        if path == "/":
            return {"versions": [{"max_version": self.max_version}]}
        if method == "POST" and path == "/resource_providers":
            return {"generation": 0}
        if isinstance(body, dict) and "resource_provider_generation" in body:
            return {"resource_provider_generation": body["resource_provider_generation"] + 1}
        return {"generation": 1}

    def summary(self) -> list[tuple[str, str]]:
        return [(m, p) for m, p, _ in self.calls]


def _old() -> ProviderTree:
    tree = ProviderTree()
    tree.new_root("node", ROOT, generation=5)
    tree.update_inventory(ROOT, {"VCPU": {"total": 8}, "VGPU": {"total": 4}})
    tree.update_traits(ROOT, ["HW_CPU_X86_AVX"])
    return tree


def _flush(
    old: ProviderTree, new: ProviderTree, allocations: Any = None, rec: Recorder | None = None
) -> tuple[Recorder, Flush]:
    rec = rec or Recorder()
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
    assert rec.summary() == [("PUT", "/resource_providers/%s/inventories" % ROOT)]
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
        ("PUT", "/resource_providers/%s/traits" % CHILD),
    ]
    assert rec.calls[0][2] == {"uuid": CHILD, "name": "node_gpu0", "parent_provider_uuid": ROOT}
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
        ("DELETE", "/resource_providers/%s" % CHILD),
    ]


def test_reshape_sends_inventories_and_allocations_in_one_call() -> None:
    old = _old()
    new = old.snapshot()
    new.new_child("node_gpu0", ROOT, CHILD)
    new.move_inventory(ROOT, CHILD, "VGPU")
    allocations = {
        "c1": {
            "allocations": {
                CHILD: {"generation": 7, "resources": {"VGPU": 2}},
                ROOT: {"resources": {"VCPU": 0}},
            },
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": 1,
        }
    }
    rec, flush = _flush(old, new, allocations)
    assert rec.summary() == [("POST", "/resource_providers"), ("POST", "/reshaper")]
    body = rec.calls[1][2]
    assert set(body["inventories"]) == {ROOT, CHILD}
    assert body["inventories"][ROOT]["resource_provider_generation"] == 5
    assert body["inventories"][CHILD]["resource_provider_generation"] == 0
    # Generations echoed by GET and zero amounts are left out.
    assert body["allocations"] == {
        "c1": {
            "allocations": {CHILD: {"resources": {"VGPU": 2}}},
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": 1,
        }
    }
    # After the 204, generations come from a fresh read.
    assert flush.result().data(ROOT).generation == 9


def test_inventory_write_keeps_fields_the_driver_left_out() -> None:
    old = ProviderTree()
    old.new_root("node", ROOT, generation=5)
    operator = normalize_inventory({"VCPU": {"total": 16, "reserved": 2, "allocation_ratio": 4.0}})
    old.update_inventory(ROOT, operator)
    new = old.snapshot()
    assert not new.update_inventory(ROOT, {"VCPU": {"total": 16}})
    rec, _ = _flush(old, new)
    assert rec.calls == []  # nothing the driver said
    new.update_inventory(ROOT, {"VCPU": {"total": 32}, "DISK_GB": {"total": 100}})
    rec, flush = _flush(old, new)
    sent = rec.calls[0][2]["inventories"]
    assert sent["VCPU"] == {**operator["VCPU"], "total": 32}
    assert sent["DISK_GB"] == {"total": 100}
    # The cache keeps the full record Placement now holds.
    assert flush.result().data(ROOT).inventory["VCPU"]["allocation_ratio"] == 4.0


def _reshape_case() -> tuple[ProviderTree, ProviderTree, Any]:
    """Old: VGPU on the root and a stale child; new: a fresh child gets
    the VGPU, the stale child goes."""
    old = _old()
    stale = old.new_child("node_old", ROOT, generation=2)
    new = old.snapshot()
    new.remove(stale)
    new.new_child("node_gpu0", ROOT, CHILD)
    new.move_inventory(ROOT, CHILD, "VGPU")
    new.update_traits(CHILD, ["CUSTOM_PGPU"])
    allocations = {
        "c1": {
            "allocations": {CHILD: {"resources": {"VGPU": 2}}},
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": 1,
        }
    }
    return old, new, allocations


def test_reshape_empties_removed_providers_and_deletes_them_after() -> None:
    old, new, allocations = _reshape_case()
    [stale] = [u for u in old.get_provider_uuids() if u != ROOT]
    rec, flush = _flush(old, new, allocations)
    assert rec.summary() == [
        ("POST", "/resource_providers"),
        ("POST", "/reshaper"),
        ("PUT", "/traits/CUSTOM_PGPU"),
        ("PUT", "/resource_providers/%s/traits" % CHILD),
        ("DELETE", "/resource_providers/%s" % stale),
    ]
    body = rec.calls[1][2]
    assert body["inventories"][stale] == {"inventories": {}, "resource_provider_generation": 2}
    assert set(body["inventories"]) == {ROOT, CHILD, stale}
    assert flush.reshaped


@pytest.mark.parametrize(
    "fail", ["POST /reshaper", "PUT /resource_classes", "POST /resource_providers"]
)
def test_failed_reshape_deletes_what_it_created(fail: str) -> None:
    old, new, allocations = _reshape_case()
    new.update_inventory(CHILD, {"CUSTOM_NEW": {"total": 1}})
    grand = new.new_child("node_gpu0_fn", CHILD)
    rec = Recorder(fail=(fail,))
    with pytest.raises(PlacementAPIError):
        _flush(old, new, allocations, rec)
    made = [
        b["uuid"]
        for m, p, b in rec.calls
        if (m, p) == ("POST", "/resource_providers")
        and not fail.startswith("POST /resource_providers")
    ]
    deleted = [p.rsplit("/", 1)[1] for m, p, _ in rec.calls if m == "DELETE"]
    assert made in ([CHILD, grand], [])
    assert deleted == list(reversed(made))  # children first
    assert not any(m == "PUT" and p.endswith("/traits") for m, p, _ in rec.calls)


def test_undo_that_fails_is_reported() -> None:
    old, new, allocations = _reshape_case()
    rec = Recorder(fail=("POST /reshaper", "DELETE"))
    flush = Flush(rec, old, new, lambda roots: {})
    with pytest.raises(PlacementAPIError):
        flush.run(old.compare(new), allocations)
    assert flush.left_behind == [CHILD] and not flush.reshaped


def test_reparent_uses_1_37_after_creating_the_new_parent() -> None:
    old = _old()
    old.new_child("node_a", ROOT, CHILD, generation=1)
    new = old.snapshot()
    numa = new.new_child("node_numa0", ROOT)
    new.reparent(CHILD, numa)
    rec, _ = _flush(old, new)
    assert rec.summary() == [
        ("GET", "/"),
        ("POST", "/resource_providers"),
        ("PUT", "/resource_providers/%s" % CHILD),
    ]
    assert rec.versions[2] == "1.37"
    assert rec.calls[2][2] == {"name": "node_a", "parent_provider_uuid": numa}


def test_reparent_refused_before_any_write_on_an_older_service() -> None:
    old = _old()
    old.new_child("node_a", ROOT, CHILD, generation=1)
    new = old.snapshot()
    new.update_inventory(ROOT, {"VCPU": {"total": 99}})
    new.reparent(CHILD, None)
    rec = Recorder(max_version="1.36")
    with pytest.raises(ValueError, match="1.37"):
        _flush(old, new, rec=rec)
    assert rec.summary() == [("GET", "/")]


def test_reshape_without_inventory_change_restates_the_root() -> None:
    old = _old()
    rec, _ = _flush(old, old.snapshot(), {})
    assert rec.summary() == [("POST", "/reshaper")]
    assert list(rec.calls[0][2]["inventories"]) == [ROOT]


def test_reshape_allocations_version_and_validation() -> None:
    typed = {
        "c": {
            "allocations": {},
            "project_id": "p",
            "user_id": "u",
            "consumer_generation": 2,
            "consumer_type": "INSTANCE",
        }
    }
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
        self.headers: dict[str, str] = {}

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
    body = (
        '{"errors": [{"status": 409, "code": '
        '"placement.concurrent_update", "detail": "gen conflict"}]}'
    )
    session = FakeSession(FakeResponse(409, body))
    with pytest.raises(PlacementAPIError) as info:
        Connection(session).call("PUT", "/x", "1.20", {})
    assert info.value.is_conflict and info.value.detail == "gen conflict"
