"""The hostile-input campaign: bodies, queries and paths for every write
and read endpoint, sent with the mutations of ``support/mutations.py``.

``WRITES`` lists one valid request per endpoint and microversion range
(built fresh against the live world, so generations are current).
``mutations`` turns one valid body into many hostile ones (see
``support/mutations.py``). ``Campaign`` sends them and checks the
three invariants: no 5xx, every error in the Placement format, and after
every accepted write every read endpoint still answers 2xx.
"""

from __future__ import annotations

import itertools
import random
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

# HOSTILE, SHORT and the hostile segments and query values are the
# campaign's too: its tests name them from here.
from support.mutations import HOSTILE as HOSTILE
from support.mutations import HOSTILE_QUERY_VALUES as HOSTILE_QUERY_VALUES
from support.mutations import HOSTILE_SEGMENTS as HOSTILE_SEGMENTS
from support.mutations import SHORT as SHORT
from support.mutations import dumps, mutations

SERVICE = {"x-roles": "admin,service"}
JSON = {"content-type": "application/json"}


@dataclass
class Ctx:
    """What a request template needs from the live world."""

    client: Any
    rp: str
    consumer: str
    counter: Iterator[int] = field(default_factory=itertools.count)

    def gen(self, rp: str | None = None) -> int:
        r = self.client.get("/resource_providers/%s" % (rp or self.rp))
        return int(r.json()["generation"]) if r.status_code == 200 else 0

    def cgen(self, consumer: str) -> int | None:
        r = self.client.at("1.38").get("/allocations/%s" % consumer)
        return r.json().get("consumer_generation")

    def n(self) -> int:
        return next(self.counter)


Body = Callable[[Ctx], Any]


@dataclass(frozen=True)
class Write:
    """One valid request: method, path (from the context) and body."""

    method: str
    path: str  # {rp} and {consumer} are the world's
    versions: tuple[str, ...]
    body: Body


def _inv(total: int = 64) -> dict[str, Any]:
    return {
        "total": total,
        "reserved": 0,
        "min_unit": 1,
        "max_unit": total,
        "step_size": 1,
        "allocation_ratio": 1.0,
    }


def _alloc_dict(c: Ctx, amount: int = 1) -> dict[str, Any]:
    return {c.rp: {"resources": {"VCPU": amount}}}


def _put_alloc(version: str) -> Body:
    def body(c: Ctx) -> Any:
        major = tuple(int(x) for x in version.split("."))
        if major < (1, 12):
            data: dict[str, Any] = {
                "allocations": [{"resource_provider": {"uuid": c.rp}, "resources": {"VCPU": 1}}]
            }
        else:
            data = {"allocations": _alloc_dict(c)}
        if major >= (1, 8):
            data.update(project_id="proj", user_id="user")
        if major >= (1, 28):
            data["consumer_generation"] = c.cgen(c.consumer)
        if major >= (1, 34):
            data["mappings"] = {"g1": [c.rp]}
        if major >= (1, 38):
            data["consumer_type"] = "INSTANCE"
        return data

    return body


def _post_alloc(version: str) -> Body:
    def body(c: Ctx) -> Any:
        inner = _put_alloc(version if version >= "1.28" else "1.12")(c)
        if version < "1.28":
            inner.pop("consumer_generation", None)
        return {c.consumer: inner}

    return body


def _reshape(version: str) -> Body:
    def body(c: Ctx) -> Any:
        return {
            "inventories": {
                c.rp: {
                    "resource_provider_generation": c.gen(),
                    "inventories": {"VCPU": _inv(), "MEMORY_MB": _inv(4096), "DISK_GB": _inv(100)},
                }
            },
            "allocations": _post_alloc(version)(c),
        }

    return body


_RP = "/resource_providers/%s"


def _new_inventory(c: Ctx) -> Any:
    # POST adds a class the provider lacks: remove it first.
    c.client.delete(_RP % c.rp + "/inventories/CUSTOM_CAMPAIGN")
    return {"resource_class": "CUSTOM_CAMPAIGN", **_inv(8)}


#: Every write endpoint, one template per microversion range.
WRITES: list[Write] = [
    Write(
        "POST",
        "/resource_providers",
        ("1.0",),
        lambda c: {"name": "rp-%d" % c.n(), "uuid": str(uuid.uuid4())},
    ),
    Write(
        "POST",
        "/resource_providers",
        ("1.14", "1.20", "latest"),
        lambda c: {
            "name": "child-%d" % c.n(),
            "uuid": str(uuid.uuid4()),
            "parent_provider_uuid": c.rp,
        },
    ),
    Write("PUT", "/resource_providers/{rp}", ("1.0",), lambda c: {"name": "root"}),
    Write(
        "PUT",
        "/resource_providers/{rp}",
        ("1.14", "latest"),
        lambda c: {"name": "root", "parent_provider_uuid": None},
    ),
    Write("POST", "/resource_providers/{rp}/inventories", ("latest",), _new_inventory),
    Write(
        "PUT",
        "/resource_providers/{rp}/inventories",
        ("1.0", "latest"),
        lambda c: {
            "resource_provider_generation": c.gen(),
            "inventories": {"VCPU": _inv(), "MEMORY_MB": _inv(4096), "DISK_GB": _inv(100)},
        },
    ),
    Write(
        "PUT",
        "/resource_providers/{rp}/inventories/VCPU",
        ("1.0", "latest"),
        lambda c: {"resource_provider_generation": c.gen(), **_inv()},
    ),
    Write(
        "PUT",
        "/resource_providers/{rp}/traits",
        ("1.6", "latest"),
        lambda c: {
            "resource_provider_generation": c.gen(),
            "traits": ["HW_CPU_X86_AVX2", "CUSTOM_CAMPAIGN"],
        },
    ),
    Write("PUT", "/resource_providers/{rp}/aggregates", ("1.1",), lambda c: [str(uuid.uuid4())]),
    Write(
        "PUT",
        "/resource_providers/{rp}/aggregates",
        ("1.19", "latest"),
        lambda c: {"aggregates": [str(uuid.uuid4())], "resource_provider_generation": c.gen()},
    ),
    Write("POST", "/resource_classes", ("1.2", "latest"), lambda c: {"name": "CUSTOM_C%d" % c.n()}),
    Write(
        "PUT",
        "/resource_classes/CUSTOM_CAMPAIGN",
        ("1.2",),
        lambda c: {"name": "CUSTOM_R%d" % c.n()},
    ),
    *[
        Write("PUT", "/allocations/{consumer}", (v,), _put_alloc(v))
        for v in ("1.0", "1.8", "1.12", "1.28", "1.34", "1.38")
    ],
    *[Write("POST", "/allocations", (v,), _post_alloc(v)) for v in ("1.13", "1.28", "1.38")],
    *[Write("POST", "/reshaper", (v,), _reshape(v)) for v in ("1.30", "1.38")],
]

#: Query strings: (path, parameters), every value also mutated.
QUERIES: list[tuple[str, dict[str, str]]] = [
    (
        "/resource_providers",
        {
            "name": "root",
            "uuid": "",
            "member_of": "",
            "resources": "VCPU:1",
            "in_tree": "",
            "required": "HW_CPU_X86_AVX2",
        },
    ),
    (
        "/allocation_candidates",
        {
            "resources": "VCPU:1,MEMORY_MB:1",
            "limit": "5",
            "required": "!CUSTOM_X",
            "member_of": "",
            "in_tree": "",
            "group_policy": "none",
            "resources1": "DISK_GB:1",
            "root_required": "",
            "same_subtree": "",
        },
    ),
    ("/traits", {"name": "in:A,B", "associated": "true"}),
    ("/usages", {"project_id": "proj", "user_id": "user", "consumer_type": "all"}),
]


def check_answer(r: Any, what: str) -> list[str]:
    """Failures of one answer: a 5xx, or an error not in the Placement
    format."""
    if r.status_code >= 500:
        return ["%s: %d %s" % (what, r.status_code, r.text[:200])]
    if r.status_code >= 400:
        try:
            err = r.json()["errors"][0]
            ok = (
                err["status"] == r.status_code
                and isinstance(err["title"], str)
                and isinstance(err["detail"], str)
            )
        except (ValueError, KeyError, IndexError, TypeError):
            ok = False
        if not ok or not r.headers.get("content-type", "").startswith("application/json"):
            return ["%s: %d not in the Placement format: %s" % (what, r.status_code, r.text[:200])]
    return []


def read_sweep(client: Any, rp: str, extra: list[str] = ()) -> list[str]:
    """Every read endpoint for the world's provider and ``extra`` paths
    at the latest microversion, and those whose answer differs at 1.0
    there too; the failures (anything but 2xx). Lists cover every row,
    so a poisoned row anywhere shows."""
    latest, old = client.at("latest"), client.at("1.0")
    rp_path = _RP % rp
    inv = latest.get(rp_path + "/inventories")
    classes = sorted(inv.json().get("inventories", {})) if inv.is_success else []
    allocs = latest.get(rp_path + "/allocations")
    consumers = (
        ["/allocations/" + c for c in allocs.json()["allocations"]] if allocs.is_success else []
    )
    both = (
        [
            "/resource_providers",
            rp_path,
            rp_path + "/inventories",
            rp_path + "/usages",
            rp_path + "/allocations",
        ]
        + consumers
        + list(extra)
    )
    newest = [
        "/",
        "/resource_classes",
        "/traits",
        "/usages?project_id=proj",
        "/usages?project_id=proj&user_id=user&consumer_type=all",
        rp_path + "/aggregates",
        rp_path + "/traits",
    ] + ["/allocation_candidates?resources=%s:1" % rc for rc in classes]
    failures = [inv, allocs]
    failures = [r for r in failures if not r.is_success]
    out = ["read %s: %d %s" % (r.url, r.status_code, r.text[:200]) for r in failures]
    for c, version, paths in ((latest, "latest", both + newest), (old, "1.0", both)):
        for path in paths:
            r = c.get(path)
            if not r.is_success:
                out.append("read %s at %s: %d %s" % (path, version, r.status_code, r.text[:200]))
    return out


@dataclass
class Campaign:
    """Sends requests and keeps every broken invariant."""

    client: Any
    ctx: Ctx
    failures: list[str] = field(default_factory=list)
    sent: int = 0
    accepted: int = 0

    def send(
        self, method: str, path: str, version: str, raw: bytes | None, what: str, sweep: bool = True
    ) -> Any:
        c = self.client.at(version)
        headers = {**SERVICE, **(JSON if raw is not None else {})}
        r = c.request(method, path, content=raw, headers=headers)
        self.sent += 1
        self.failures += check_answer(r, "%s %s @%s %s" % (method, path, version, what))
        if r.is_success and method != "GET":
            self.accepted += 1
            if sweep:
                extra = []
                loc = r.headers.get("location")
                if loc and "/resource_providers/" in loc:
                    extra.append(loc.split("placement.test", 1)[-1])
                broken = read_sweep(self.client, self.ctx.rp, extra)
                self.failures += [
                    "after %s %s @%s %s: %s" % (method, path, version, what, b) for b in broken
                ]
        return r

    def write(
        self,
        template: Write,
        values: list[Any],
        version: str,
        limit: int | None = None,
        seed: int = 0,
    ) -> None:
        path = template.path.format(rp=self.ctx.rp, consumer=self.ctx.consumer)
        base = template.body(self.ctx)
        r = self.send(template.method, path, version, dumps(base), "base")
        if not r.is_success:
            self.failures.append(
                "the valid base of %s %s @%s was refused: "
                "%d %s" % (template.method, path, version, r.status_code, r.text[:300])
            )
        every = mutations(base, values)
        # The default run tries a fixed sample of each template's
        # mutations; the stress run (limit None) tries them all.
        chosen = (
            every
            if limit is None or len(every) <= limit
            else (random.Random(seed).sample(every, limit))
        )
        for label, transform in chosen:
            raw = transform(template.body(self.ctx))
            self.send(template.method, path, version, raw, label)
