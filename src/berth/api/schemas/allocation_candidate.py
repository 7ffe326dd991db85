"""The query string of ``GET /allocation_candidates``: its JSON Schemas,
one per microversion where the accepted parameters change, and
``parse_query``, which every reader of such a query shares (the
candidates, explain and fit endpoints, and the dashboard's forms)."""

from __future__ import annotations

import copy
from typing import Any

from berth.api import microversion, util
from berth.api.errors import HTTPProblem
from berth.api.schemas import Versioned, pick, validator
from berth.domain.allocation_candidate import parse
from berth.domain.allocation_candidate.order import make_order
from berth.domain.allocation_candidate.request import (
    HOSTS_FIRST,
    NAMES,
    SCORED,
    Order,
    RequestGroup,
    RequestWide,
    Settings,
)

_STRING: dict[str, Any] = {"type": "string"}

_1_10: dict[str, Any] = {
    "type": "object",
    "properties": {"resources": _STRING},
    "required": ["resources"],
    "additionalProperties": False,
}

_1_16 = copy.deepcopy(_1_10)
_1_16["properties"]["limit"] = {
    "type": ["integer", "string"],
    "pattern": "^[1-9][0-9]*$",
    "minimum": 1,
    "minLength": 1,
}

_1_17 = copy.deepcopy(_1_16)
_1_17["properties"]["required"] = {"type": ["string"]}

_1_21 = copy.deepcopy(_1_17)
_1_21["properties"]["member_of"] = {"type": ["string"]}


def _grouped(suffix: str, prefixes: tuple[str, ...]) -> dict[str, Any]:
    return {"^%s(%s)?$" % (p, suffix): _STRING for p in prefixes}


# 1.25: numbered groups replace the plain keys, and group_policy arrives.
_1_25 = copy.deepcopy(_1_21)
for _key in ("resources", "required", "member_of"):
    del _1_25["properties"][_key]
del _1_25["required"]
_1_25["patternProperties"] = _grouped("[1-9][0-9]*", ("resources", "required", "member_of"))
_1_25["properties"]["group_policy"] = {"type": "string", "enum": ["none", "isolate"]}

_1_31 = copy.deepcopy(_1_25)
_1_31["patternProperties"].update(_grouped("[1-9][0-9]*", ("in_tree",)))

# 1.33: suffixes may be any 1-64 characters of [a-zA-Z0-9_-].
_1_33 = copy.deepcopy(_1_31)
_1_33["patternProperties"] = _grouped(
    "[a-zA-Z0-9_-]{1,64}", ("resources", "required", "member_of", "in_tree")
)

_1_35 = copy.deepcopy(_1_33)
_1_35["properties"]["root_required"] = {"type": ["string"]}

_1_36 = copy.deepcopy(_1_35)
_1_36["properties"]["same_subtree"] = {"type": ["string"]}

#: The query strings.
SCHEMAS: Versioned = (
    ("1.10", validator(_1_10)),
    ("1.16", validator(_1_16)),
    ("1.17", validator(_1_17)),
    ("1.21", validator(_1_21)),
    ("1.25", validator(_1_25)),
    ("1.31", validator(_1_31)),
    ("1.33", validator(_1_33)),
    ("1.35", validator(_1_35)),
    ("1.36", validator(_1_36)),
)


#: Query parameters of allocation candidates no schema pattern names (the
#: nearest-name hint of ``errors.for_people`` for an unknown one).
QUERY_NAMES = ("limit", "group_policy", "root_required", "same_subtree")


def parse_query(
    pairs: list[tuple[str, str]], version: tuple[int, int]
) -> tuple[list[RequestGroup], RequestWide]:
    """The request groups and request-wide parameters of the query
    ``pairs`` at ``version``. Raises HTTPProblem 400 for a query the
    schema refuses, and the parser's BadRequest errors (400 too, with
    the Placement query codes from 1.23) for one it cannot read."""
    util.validate_pairs(pairs, pick(SCHEMAS, version))
    return parse.parse_request(pairs, microversion.wants(version))


#: The parameters ``GET /berth/allocation_candidates`` adds to the query
#: of ``GET /allocation_candidates`` (docs/allocation-candidates.md,
#: "Order"): the order, and class and trait weights.
_WEIGHTED = {
    "type": "string",
    "pattern": r"^[A-Z0-9_]{1,255}:[-+]?[0-9]{1,7}(\.[0-9]{1,6})?"
    r"(,[A-Z0-9_]{1,255}:[-+]?[0-9]{1,7}(\.[0-9]{1,6})?)*$",
}
ORDER_PROPERTIES: dict[str, Any] = {
    "order": {
        "type": "string",
        "enum": list(NAMES),
        "description": "Berth only: the order of the answer (default: [berth] candidate_order).",
    },
    "weights": {
        **_WEIGHTED,
        "description": "Berth only, with order spread or pack: "
        "CLASS:weight pairs, comma-separated "
        "(default: [berth] "
        "candidate_order_weights).",
    },
    "prefer": {
        **_WEIGHTED,
        "description": "Berth only, with order spread or pack: "
        "TRAIT:weight pairs, comma-separated; a "
        "negative weight discourages (default: "
        "[berth] candidate_order_preferences).",
    },
}
ORDER_V = validator({"type": "object", "properties": ORDER_PROPERTIES})


def _with_order(schema: Any) -> dict[str, Any]:
    out: dict[str, Any] = copy.deepcopy(schema)
    out["properties"].update(ORDER_PROPERTIES)
    return out


#: The query strings of ``GET /berth/allocation_candidates``: those of
#: ``SCHEMAS`` with the order parameters (the handler checks the order
#: parameters with ``ORDER_V``, the rest with ``SCHEMAS``).
ORDERED_SCHEMAS: Versioned = tuple(
    (since, validator(_with_order(checker.schema))) for since, checker in SCHEMAS
)


def split_order(pairs: list[tuple[str, str]]) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """``pairs`` without the order parameters, and those, checked with
    ``ORDER_V``. Raises HTTPProblem 400 for one given twice or not of
    its form."""
    rest, found = [], {}
    for key, value in pairs:
        if key not in ORDER_PROPERTIES:
            rest.append((key, value))
        elif key in found:
            raise HTTPProblem(400, "Invalid query string parameters: %s may be given once" % key)
        else:
            found[key] = value
    util.validate_pairs(list(found.items()), ORDER_V)
    return rest, found


def parse_weights(key: str, text: str) -> dict[str, float]:
    """``weights`` or ``prefer`` (of ``ORDER_V``'s form) as a dict.
    Raises HTTPProblem 400 for a name given twice."""
    out: dict[str, float] = {}
    for item in text.split(","):
        name, weight = item.split(":")
        if name in out:
            raise HTTPProblem(
                400, "Invalid query string parameters: %s names %s twice" % (key, name)
            )
        out[name] = float(weight)
    return out


def requested_order(conf: Any, given: dict[str, str]) -> Order:
    """The order a request asks for (``given``: its order parameters, as
    ``split_order`` returns them; none on the upstream URL), each part
    defaulting to ``conf``'s ``[berth] candidate_order`` and its weights
    (random where that is uuid and ``[placement]
    randomize_allocation_candidates`` is set). Raises HTTPProblem 400
    for a name weighed twice, or weights with an order that has no
    score."""
    name = conf.berth.candidate_order
    if name == "uuid" and conf.placement.randomize_allocation_candidates:
        name = "random"
    name = given.get("order", name)
    weights = (
        parse_weights("weights", given["weights"])
        if "weights" in given
        else dict(conf.berth.candidate_order_weights)
    )
    prefer = (
        parse_weights("prefer", given["prefer"])
        if "prefer" in given
        else dict(conf.berth.candidate_order_preferences)
    )
    if name not in SCORED and ("weights" in given or "prefer" in given):
        raise HTTPProblem(
            400,
            "Invalid query string parameters: weights "
            "and prefer apply only to order spread or pack",
        )
    return make_order(name, weights, prefer)


def candidate_settings(conf: Any, order: Order) -> Settings:
    """What shapes an answer in ``order`` besides the query: the
    ``[placement]`` and ``[berth]`` options (the candidates endpoints and
    the dashboard's first-hosts page search alike)."""
    strategy = conf.placement.allocation_candidates_generation_strategy
    if (
        strategy == "depth-first"
        and conf.berth.candidate_hosts_first
        and conf.placement.max_allocation_candidates < 0
    ):
        strategy = HOSTS_FIRST
    return Settings(
        order=order,
        max_candidates=conf.placement.max_allocation_candidates,
        strategy=strategy,
        memo=conf.berth.candidate_memo,
    )
