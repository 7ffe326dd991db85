"""The example VGPU driver's start-up reshape, as the agent and client
tests run it: the old flat layout with consumers holding VGPU on the
root, and the checks that the nested layout moved them, usages unchanged."""

from __future__ import annotations

import uuid

import httpx

from berth.client import ReportClient
from berth.client.agent import ResourceUpdater
from berth.examples.vgpu import VGPUDriver
from support.api_setup import allocate, ok, state, usage_totals

LAYOUT = {"cn1": {"vcpus": 8, "memory_mb": 4096, "gpus": {"gpu0": 4, "gpu1": 4}}}
# Each consumer's VGPU (and one VCPU); 3 + 2 + 2 needs both GPUs.
CONSUMERS = {str(uuid.UUID(int=i + 1)): n for i, n in enumerate([3, 2, 2])}


def old_layout(http: httpx.Client) -> str:
    """The driver's old layout with the CONSUMERS holding VGPU on it."""
    client = ReportClient(http)
    updater = ResourceUpdater(VGPUDriver(LAYOUT, nested=False), client)
    assert updater.sync_node("cn1", startup=True).status == "updated"
    root = client.get_provider_tree_and_ensure_root("cn1").data("cn1").uuid
    for consumer, vgpu in CONSUMERS.items():
        ok(allocate(http, consumer, {root: {"VGPU": vgpu, "VCPU": 1}}), 204)
    return root


def check_new_layout(http: httpx.Client, root: str, usages_before: dict[str, int]) -> None:
    after = state(http)
    children = {u: s for u, s in after.items() if u != root}
    assert len(children) == 2
    assert set(after[root]["inventories"]) == {"VCPU", "MEMORY_MB"}
    assert sorted(s["inventories"]["VGPU"]["total"] for s in children.values()) == [4, 4]
    for consumer, vgpu in CONSUMERS.items():
        got = ok(http.get("/allocations/" + consumer))["allocations"]
        assert got[root]["resources"] == {"VCPU": 1}
        [(gpu, entry)] = [(u, e) for u, e in got.items() if u != root]
        assert gpu in children and entry["resources"] == {"VGPU": vgpu}
    assert usage_totals(http) == usages_before
    for child in children:
        traits = ok(http.get("/resource_providers/%s/traits" % child))
        assert traits["traits"] == ["CUSTOM_PGPU"]
