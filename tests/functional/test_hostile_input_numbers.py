"""A number of the wrong kind in any integer field of a body or a query
(1.0, 1.5, 1e3, true, 2**63, 1e300, 10**30, a string) gets upstream's
answer: a 4xx, or the value stored as an int, read back as one; never a
500 (hostile input in general: test_hostile_input.py).

Covers the request checks of ``berth.api.util`` and ``berth.api.schemas``,
and the inventory, allocation, reshaper, trait and aggregate writes behind
them."""

from __future__ import annotations

import uuid

import orjson
import pytest

from support.api_setup import SERVICE
from tests.functional.conftest import RP

# --- A number of the wrong kind in every integer field ----------------------
#
# Upstream validates with jsonschema's newest draft, where 1.0 and 1e3 are
# integers (a bool never is), and stores them as ints: each table below is
# what upstream 16.0.0 answers, run live, but where a comment says Berth
# differs. A string names the status of a refusal; anything else is an
# accepted value and what the field reads back as afterwards (its type
# too: 1, never 1.0). Berth's answer to the write holds no float either,
# where upstream echoes the 1.0 it was sent (and stores 1).

#: Each number as JSON text, by name.
NUMBERS = {
    "1.0": b"1.0",
    "1.5": b"1.5",
    "1e3": b"1e3",
    "true": b"true",
    "2**63": b"9223372036854775808",
    "1e300": b"1e300",
    "10**30": b"1" + b"0" * 30,
    "string": b'"1"',
}
_REFUSED = {name: "400" for name in NUMBERS}
#: Inventory integers and allocation amounts (at most 2**31 - 1). Upstream
#: answers a huge amount with a 409 (more than the capacity), Berth with
#: a 400, as for the inventory fields.
BOUNDED = {**_REFUSED, "1.0": 1, "1e3": 1000}
#: allocation_ratio, any number up to the largest 32-bit float. Upstream
#: also takes 2**63 and 10**30, whose capacity no reader survives (see
#: test_overflowing_capacity_is_refused).
RATIO = {**_REFUSED, "1.0": 1.0, "1.5": 1.5, "1e3": 1000.0}
#: A generation compared with the current one, 1 (the read-back is the
#: next generation, 2).
GENERATION = {**_REFUSED, "1.0": 2, "1e3": "409", "2**63": "409", "1e300": "409", "10**30": "409"}


def _ignored(stored: object) -> dict[str, object]:
    """A generation that is checked for its type and then ignored: the
    write is done and reads back ``stored``."""
    return {
        **GENERATION,
        **{name: stored for name, status in GENERATION.items() if status != "400"},
    }


class NumberCase:
    """One integer field of one write: ``send(client, ctx, text)`` sends
    ``text`` as the field's value; ``read(client, ctx)`` reads the field
    back (None when absent); ``setup(client)`` makes a fresh ``ctx``."""

    def __init__(self, name, want, setup, send, read):
        self.name, self.want = name, want
        self.setup, self.send, self.read = setup, send, read

    def __repr__(self):
        return self.name


def _raw(body, text):
    """``body`` as JSON, with ``text`` for its "@N@" string."""
    return orjson.dumps(body).replace(b'"@N@"', text)


def _fresh_provider(client, total=5000):
    """A provider with ``total`` VCPU, at generation 1."""
    rp = str(uuid.uuid4())
    r = client.post("/resource_providers", json={"name": rp, "uuid": rp})
    assert r.status_code == 200, r.text
    r = client.put(
        "/resource_providers/%s/inventories" % rp,
        json={"resource_provider_generation": 0, "inventories": {"VCPU": {"total": total}}},
    )
    assert r.status_code == 200, r.text
    return {"rp": rp, "consumer": str(uuid.uuid4())}


def _with_consumer(client):
    """A provider and a consumer holding 1 VCPU of it (consumer generation
    1, provider generation 2)."""
    ctx = _fresh_provider(client)
    r = client.put("/allocations/" + ctx["consumer"], json=_allocation(ctx["rp"], 1, None))
    assert r.status_code == 204, r.text
    return ctx


def _send(client, method, path, body, text, version=None):
    headers = {"content-type": "application/json", **SERVICE}
    if version:
        headers["openstack-api-version"] = "placement " + version
    return client.request(method, path, content=_raw(body, text), headers=headers)


def _inventory_value(rc, field):
    def read(client, ctx):
        body = client.get("/resource_providers/%s/inventories" % ctx["rp"]).json()
        if field == "resource_provider_generation":
            return body[field]
        return body["inventories"].get(rc, {}).get(field)

    return read


def _inventory_cases():
    for field in (
        "total",
        "reserved",
        "min_unit",
        "max_unit",
        "step_size",
        "allocation_ratio",
        "resource_provider_generation",
    ):
        want = {"allocation_ratio": RATIO, "resource_provider_generation": GENERATION}.get(
            field, BOUNDED
        )
        gen = "@N@" if field == "resource_provider_generation" else 1
        record = {"total": 5000}
        if gen == 1:
            record[field] = "@N@"
        yield NumberCase(
            "PUT inventories " + field,
            want,
            _fresh_provider,
            lambda client, ctx, text, gen=gen, record=record: _send(
                client,
                "PUT",
                "/resource_providers/%s/inventories" % ctx["rp"],
                {"resource_provider_generation": gen, "inventories": {"VCPU": record}},
                text,
            ),
            _inventory_value("VCPU", field),
        )
        yield NumberCase(
            "PUT inventories/VCPU " + field,
            want,
            _fresh_provider,
            lambda client, ctx, text, gen=gen, record=record: _send(
                client,
                "PUT",
                "/resource_providers/%s/inventories/VCPU" % ctx["rp"],
                {"resource_provider_generation": gen, **record},
                text,
            ),
            _inventory_value("VCPU", field),
        )
        # A reshape bumps the generation twice, as upstream's does.
        reshaped = {**want, "1.0": 3} if want is GENERATION else want
        yield NumberCase(
            "reshaper inventories " + field,
            reshaped,
            _fresh_provider,
            lambda client, ctx, text, gen=gen, record=record: _send(
                client,
                "POST",
                "/reshaper",
                {
                    "inventories": {
                        ctx["rp"]: {
                            "resource_provider_generation": gen,
                            "inventories": {"VCPU": record},
                        }
                    },
                    "allocations": {},
                },
                text,
            ),
            _inventory_value("VCPU", field),
        )
        # POST takes a generation and ignores it.
        post_field = "total" if gen != 1 else field
        yield NumberCase(
            "POST inventories " + field,
            _ignored(5000) if gen != 1 else want,
            _fresh_provider,
            lambda client, ctx, text, field=field: _send(
                client,
                "POST",
                "/resource_providers/%s/inventories" % ctx["rp"],
                {"resource_class": "DISK_GB", "total": 5000, field: "@N@"},
                text,
            ),
            _inventory_value("DISK_GB", post_field),
        )


def _allocation(rp, amount, consumer_generation, generation=None):
    on_rp = {"resources": {"VCPU": amount}}
    if generation is not None:
        on_rp["generation"] = generation
    return {
        "allocations": {rp: on_rp},
        "project_id": "p",
        "user_id": "u",
        "consumer_generation": consumer_generation,
        "consumer_type": "INSTANCE",
    }


def _allocated(what):
    def read(client, ctx):
        body = client.get("/allocations/" + ctx["consumer"]).json()
        if what == "consumer_generation":
            return body.get(what)
        return body["allocations"].get(ctx["rp"], {}).get("resources", {}).get("VCPU")

    return read


def _reshape(ctx, allocations, generation=1):
    return {
        "inventories": {
            ctx["rp"]: {
                "resource_provider_generation": generation,
                "inventories": {"VCPU": {"total": 5000}},
            }
        },
        "allocations": {ctx["consumer"]: allocations},
    }


def _allocation_cases():
    amount = _allocated("amount")
    yield NumberCase(
        "PUT allocations amount",
        BOUNDED,
        _fresh_provider,
        lambda client, ctx, text: _send(
            client,
            "PUT",
            "/allocations/" + ctx["consumer"],
            _allocation(ctx["rp"], "@N@", None),
            text,
        ),
        amount,
    )
    yield NumberCase(
        "PUT allocations amount (1.0)",
        BOUNDED,
        _fresh_provider,
        lambda client, ctx, text: _send(
            client,
            "PUT",
            "/allocations/" + ctx["consumer"],
            {
                "allocations": [
                    {"resource_provider": {"uuid": ctx["rp"]}, "resources": {"VCPU": "@N@"}}
                ]
            },
            text,
            "1.0",
        ),
        amount,
    )
    yield NumberCase(
        "POST allocations amount",
        BOUNDED,
        _fresh_provider,
        lambda client, ctx, text: _send(
            client,
            "POST",
            "/allocations",
            {ctx["consumer"]: _allocation(ctx["rp"], "@N@", None)},
            text,
        ),
        amount,
    )
    yield NumberCase(
        "reshaper allocations amount",
        BOUNDED,
        _fresh_provider,
        lambda client, ctx, text: _send(
            client, "POST", "/reshaper", _reshape(ctx, _allocation(ctx["rp"], "@N@", None)), text
        ),
        amount,
    )
    # The provider generation of an allocation is accepted and ignored.
    yield NumberCase(
        "PUT allocations provider generation",
        _ignored(1),
        _fresh_provider,
        lambda client, ctx, text: _send(
            client,
            "PUT",
            "/allocations/" + ctx["consumer"],
            _allocation(ctx["rp"], 1, None, "@N@"),
            text,
        ),
        amount,
    )
    generation = _allocated("consumer_generation")
    yield NumberCase(
        "PUT allocations consumer_generation",
        GENERATION,
        _with_consumer,
        lambda client, ctx, text: _send(
            client, "PUT", "/allocations/" + ctx["consumer"], _allocation(ctx["rp"], 2, "@N@"), text
        ),
        generation,
    )
    yield NumberCase(
        "POST allocations consumer_generation",
        GENERATION,
        _with_consumer,
        lambda client, ctx, text: _send(
            client,
            "POST",
            "/allocations",
            {ctx["consumer"]: _allocation(ctx["rp"], 2, "@N@")},
            text,
        ),
        generation,
    )
    yield NumberCase(
        "reshaper consumer_generation",
        GENERATION,
        _with_consumer,
        lambda client, ctx, text: _send(
            client,
            "POST",
            "/reshaper",
            _reshape(ctx, _allocation(ctx["rp"], 2, "@N@"), generation=2),
            text,
        ),
        generation,
    )


def _provider_generation(client, ctx):
    return client.get("/resource_providers/" + ctx["rp"]).json()["generation"]


NUMBER_CASES = [
    *_inventory_cases(),
    *_allocation_cases(),
    NumberCase(
        "PUT traits resource_provider_generation",
        GENERATION,
        _fresh_provider,
        lambda client, ctx, text: _send(
            client,
            "PUT",
            "/resource_providers/%s/traits" % ctx["rp"],
            {"resource_provider_generation": "@N@", "traits": ["HW_CPU_X86_AVX"]},
            text,
        ),
        _provider_generation,
    ),
    NumberCase(
        "PUT aggregates resource_provider_generation",
        GENERATION,
        _fresh_provider,
        lambda client, ctx, text: _send(
            client,
            "PUT",
            "/resource_providers/%s/aggregates" % ctx["rp"],
            {"resource_provider_generation": "@N@", "aggregates": [RP]},
            text,
        ),
        _provider_generation,
    ),
]


def _floats(body, path=""):
    """Where a float stands in ``body`` other than as an allocation ratio
    (a write answers with what it stored: 1, where upstream echoes 1.0)."""
    if isinstance(body, dict):
        return [
            p
            for key, value in body.items()
            if key != "allocation_ratio"
            for p in _floats(value, "%s.%s" % (path, key))
        ]
    return [path] if isinstance(body, float) else []


def _misread(case, client, ctx, r, want, before):
    """What is wrong with answer ``r`` and the field read after it, given
    what ``case.want`` says (``before``: the field before the write)."""
    if isinstance(want, str):
        after = case.read(client, ctx)
        if str(r.status_code) != want or after != before:
            return "%s, then read %r; want %s, unchanged %r" % (r.status_code, after, want, before)
        if r.json()["errors"][0]["status"] != r.status_code:
            return "an error body of another status: %s" % r.text[:200]
        return None
    if r.status_code >= 300:
        return "%s %s; want a 2xx" % (r.status_code, r.text[:200])
    after = case.read(client, ctx)
    if type(after) is not type(want) or after != want:
        return "then read %r; want %r (%s)" % (after, want, type(want).__name__)
    if r.content and _floats(r.json()):
        return "floats in the answer at %s" % _floats(r.json())
    return None


@pytest.mark.parametrize("case", NUMBER_CASES, ids=repr)
def test_numbers_of_the_wrong_kind(client, case):
    ctx = case.setup(client)
    before = case.read(client, ctx)
    wrong = []
    for name, text in NUMBERS.items():
        want = case.want[name]
        r = case.send(client, ctx, text)
        problem = _misread(case, client, ctx, r, want, before)
        if problem:
            wrong.append("%s: %s" % (name, problem))
        if not isinstance(want, str):  # a write was done: start afresh
            ctx = case.setup(client)
            before = case.read(client, ctx)
    assert not wrong, "%s:\n  %s" % (case.name, "\n  ".join(wrong))


#: The same numbers in a query string: whatever is not digits is a 400,
#: as upstream (which answers a 500 where Berth answers 2**63 and 10**30).
QUERY_NUMBERS = {
    "1.0": "1.0",
    "1.5": "1.5",
    "1e3": "1e3",
    "true": "true",
    "2**63": str(2**63),
    "1e300": "1e300",
    "10**30": str(10**30),
    "string": "one",
}


@pytest.mark.parametrize(
    "path",
    [
        "/resource_providers?resources=VCPU:%s",
        "/allocation_candidates?resources=VCPU:%s",
        "/allocation_candidates?resources1=VCPU:%s",
        "/allocation_candidates?resources=VCPU:1&limit=%s",
    ],
)
def test_query_numbers_of_the_wrong_kind(client, hostile_world, path):
    wrong = []
    for name, text in QUERY_NUMBERS.items():
        r = client.get(path % text)
        want = 200 if name in ("2**63", "10**30") else 400
        if r.status_code != want:
            wrong.append("%s: %s %s" % (name, r.status_code, r.text[:200]))
        elif want == 200 and "limit" in path:
            assert len(r.json()["allocation_requests"]) == 1
    assert not wrong, "%s:\n  %s" % (path, "\n  ".join(wrong))
