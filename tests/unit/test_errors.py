"""The error format and the one mapping table."""

from __future__ import annotations

import inspect

from berth.api import errors
from berth.domain import errors as de


def test_every_domain_error_has_a_row():
    classes = [c for _, c in inspect.getmembers(de, inspect.isclass)
               if issubclass(c, de.DomainError)]
    missing = [c.__name__ for c in classes if c not in errors.DOMAIN_ERRORS]
    assert missing == []


def test_codes_are_upstream_values():
    assert errors.CONCURRENT_UPDATE == "placement.concurrent_update"
    assert errors.INVENTORY_INUSE == "placement.inventory.inuse"
    assert errors.DEFAULT == "placement.undefined_code"
    assert len(set(errors.ALL_CODES)) == len(errors.ALL_CODES)


def test_problem_body_shape():
    body = errors.HTTPProblem(409, "gen moved", errors.CONCURRENT_UPDATE
                              ).to_dict("req-1", True)
    assert body == {"errors": [{
        "status": 409, "title": "Conflict", "code": "placement.concurrent_update",
        "request_id": "req-1",
        "detail": "There was a conflict when trying to complete your "
                  "request.\n\n gen moved  "}]}


def test_domain_mapping_uses_most_specific_class():
    assert errors.status_and_code(de.ConcurrentUpdate("x")) == (
        409, "placement.concurrent_update")
    assert errors.status_and_code(de.NotFound("x")) == (
        404, "placement.undefined_code")
