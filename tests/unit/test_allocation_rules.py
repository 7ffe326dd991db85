"""Pure rules of allocations: consumer uuid spelling and schema choice."""

from __future__ import annotations

import jsonschema
import pytest

from berth.api.schemas import allocation as schema
from berth.api.schemas import pick
from berth.domain.common import normalize_uuid

CANON = "75d0f5f7-75d9-458c-b204-f90ac91604ec"


@pytest.mark.parametrize("given", [
    CANON, CANON.upper(), CANON.replace("-", ""), "{%s}" % CANON,
    "urn:uuid:" + CANON])
def test_uuid_spellings_upstream_accepts(given: str) -> None:
    assert normalize_uuid(given) == CANON


@pytest.mark.parametrize("given", ["not-a-uuid", "", CANON + "0",
                                   CANON.replace("-", "+")])
def test_uuid_spellings_rejected(given: str) -> None:
    assert normalize_uuid(given) is None


def _valid(version: tuple[int, int], data: object) -> bool:
    try:
        pick(schema.PUT_SCHEMAS, version).validate(data)
    except jsonschema.ValidationError:
        return False
    return True


def test_put_schema_per_microversion() -> None:
    rp = {CANON: {"resources": {"VCPU": 1}}}
    owner = {"project_id": "p", "user_id": "u"}
    listed = {"allocations": [{"resource_provider": {"uuid": CANON},
                               "resources": {"VCPU": 1}}]}
    assert _valid((1, 0), listed)
    assert not _valid((1, 8), listed)
    assert _valid((1, 8), {**listed, **owner})
    assert _valid((1, 12), {"allocations": rp, **owner})
    assert not _valid((1, 12), {"allocations": {}, **owner})
    gen = {"consumer_generation": None}
    assert _valid((1, 28), {"allocations": {}, **owner, **gen})
    assert not _valid((1, 33), {"allocations": rp, **owner, **gen,
                                "mappings": {"a": [CANON]}})
    assert _valid((1, 34), {"allocations": rp, **owner, **gen,
                            "mappings": {"a": [CANON]}})
    assert not _valid((1, 38), {"allocations": rp, **owner, **gen})
    assert _valid((1, 38), {"allocations": rp, **owner, **gen,
                            "consumer_type": "INSTANCE"})
    assert not _valid((1, 38), {"allocations": {CANON: {"resources": {
        "VCPU": 2**31}}}, **owner, **gen, "consumer_type": "INSTANCE"})
