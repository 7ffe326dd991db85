"""The hostile-input campaign: bodies, queries and paths for every write
and read endpoint, and the mutations applied to them.

``WRITES`` lists one valid request per endpoint and microversion range
(built fresh against the live world, so generations are current).
``mutations`` turns one valid body into many hostile ones: every value
replaced by every value in ``HOSTILE`` (types, bounds, lengths, unicode,
nesting), every key removed, renamed to an odd key or duplicated, and an
extra field added at every level. ``Campaign`` sends them and checks the
three invariants: no 5xx, every error in the Placement format, and after
every accepted write every read endpoint still answers 2xx.
"""

from __future__ import annotations

import itertools
import json
import random
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

SERVICE = {"x-roles": "admin,service"}
JSON = {"content-type": "application/json"}

_LONG = 10_000
#: Values that stress a type, a bound, a length, unicode or nesting.
HOSTILE: list[Any] = [
    None,
    True,
    False,
    0,
    -1,
    1,
    2**31 - 1,
    2**31,
    -(2**31) - 1,
    2**53 + 1,
    2**63 - 1,
    2**63,
    2**64 - 1,
    -(2**63),
    1.5,
    -0.0,
    1e308,
    -1e308,
    5e-324,
    3.4028235e38,
    float("nan"),
    float("inf"),
    "",
    " ",
    "n" * 200,
    "n" * 201,
    "a" * 255,
    "a" * 256,
    "\u00e9" * 255,
    "\U0001f600" * 255,
    "\U0001f600" * 256,
    "A" * _LONG,
    "CUSTOM_" + "A" * 248,
    "CUSTOM_" + "A" * 249,
    "\ud800",
    "\udfff",
    "\uffff",
    "\U0001f600" * 64,
    "e\u0301" * 3,
    "\u202eevil",
    "\u200b",
    "\u2028",
    "x\ty\n",
    "NaN",
    "../..",
    [],
    {},
    [1, 1],
    {"a": 1},
    [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]],
]
#: Odd keys: empty, long, unicode, control characters, lone surrogates.
ODD_KEYS = [
    "",
    " ",
    "k" * 300,
    "\ud800",
    "\u00e9",
    "\U0001f600",
    "a\nb",
    "VCPU\n",
    "CUSTOM_" + "X" * 300,
]
#: The subset used at the older microversions of an endpoint.
SHORT = [None, "", -1, 2**31, 2**64 - 1, 1e308, float("nan"), "\ud800", "A" * _LONG, {}, []]


def dumps(body: Any) -> bytes:
    """JSON as a hostile client would write it: NaN and Infinity as bare
    words and lone surrogates as escapes, which strict encoders refuse."""
    return json.dumps(body, allow_nan=True).encode()


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    if isinstance(node, dict):
        for key, value in node.items():
            yield prefix + (key,)
            yield from _paths(value, prefix + (key,))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield prefix + (i,)
            yield from _paths(value, prefix + (i,))


def _copy(body: Any) -> Any:
    return json.loads(json.dumps(body))


def _set(body: Any, path: tuple[Any, ...], value: Any) -> Any:
    out = _copy(body)
    node = out
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return out


def _parent(body: Any, path: tuple[Any, ...]) -> Any:
    node = body
    for step in path[:-1]:
        node = node[step]
    return node


Mutation = tuple[str, Callable[[Any], bytes]]


def _remove(path: tuple[Any, ...]) -> Callable[[Any], bytes]:
    def apply(body: Any) -> bytes:
        out = _copy(body)
        del _parent(out, path)[path[-1]]
        return dumps(out)

    return apply


def _rename(path: tuple[Any, ...], key: str) -> Callable[[Any], bytes]:
    def apply(body: Any) -> bytes:
        out = _copy(body)
        node = _parent(out, path)
        node[key] = node.pop(path[-1])
        return dumps(out)

    return apply


def _extra(path: tuple[Any, ...]) -> Callable[[Any], bytes]:
    def apply(body: Any) -> bytes:
        out = _copy(body)
        _parent(out, path)["zz_extra"] = 1
        return dumps(out)

    return apply


def _duplicate(key: Any, value: Any) -> Callable[[Any], bytes]:
    # The same key twice: the raw text carries a first, hostile copy.
    def apply(body: Any) -> bytes:
        return (
            "{%s: %s, %s" % (json.dumps(key), json.dumps(value), dumps(body).decode()[1:])
        ).encode()

    return apply


def _replace(path: tuple[Any, ...], value: Any) -> Callable[[Any], bytes]:
    return lambda body: dumps(_set(body, path, value))


def mutations(body: Any, values: list[Any]) -> list[Mutation]:
    """(label, transform) for every mutation of ``body``'s shape; each
    transform takes a fresh valid body of that shape (current
    generations) and returns the hostile raw JSON."""
    out: list[Mutation] = []
    if isinstance(body, dict):
        out.append(("extra-top", lambda b: dumps({**b, "zz_extra": 1})))
    for path in _paths(body):
        label = "/".join(map(str, path))
        out += [("%s=%d" % (label, i), _replace(path, value)) for i, value in enumerate(values)]
        if isinstance(_parent(body, path), dict):
            out.append((label + ":missing", _remove(path)))
            out += [("%s:key=%r" % (label, key[:12]), _rename(path, key)) for key in ODD_KEYS]
            out.append((label + ":extra", _extra(path)))
            if len(path) == 1:
                out.append((label + ":dup", _duplicate(path[-1], values[0])))
    return out


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

#: Hostile path segments (for every route with a parameter).
HOSTILE_SEGMENTS = [
    "",
    "%00",
    "a" * 300,
    quote("\u00e9"),
    quote("\U0001f600"),
    "%ff%fe",
    "%2e%2e",
    quote("\u202e"),
    "..",
    "9" * 40,
    "CUSTOM_" + "A" * 300,
    "00000000-0000-0000-0000-00000000000g",
    str(uuid.uuid4()).upper(),
    str(uuid.uuid4()).replace("-", ""),
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
HOSTILE_QUERY_VALUES = [
    "",
    "%00",
    "A" * 300,
    "VCPU:99999999999999999999",
    "VCPU:-1",
    "VCPU:2147483648",
    "VCPU:0",
    ":",
    ",",
    "in:",
    "!",
    "!!X",
    "VCPU:1,VCPU:1",
    "%ff",
    "%F0%9F%98%80",
    "CUSTOM_" + "A" * 300,
    "in:" + ",".join(["A"] * 500),
    "1e99",
    "NaN",
    "-1",
    "99999999999999999999",
    "in:" + "X" * 300,
    "VCPU:1&resources=VCPU:1",
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
