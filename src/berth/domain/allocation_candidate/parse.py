"""Query-string parsing for allocation candidates and provider filters.

Every message and error class here is upstream Placement's, so clients see
the same 400s; only the order of names inside a message is made stable.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable, Iterable

from berth.domain import common, errors
from berth.domain.allocation_candidate.request import RequestGroup, RequestWide, TraitExpr

#: The request's microversion test: ``want("1.22")`` is True when the
#: request asked for 1.22 or later. The API layer binds its one test
#: (``microversion.wants``) to the request's version; the domain never
#: compares versions itself.
Wants = Callable[[str], bool]
Pairs = list[tuple[str, str]]

PREFIXES = ("resources", "required", "member_of", "in_tree")
_KEY_NUMBERED = re.compile(r"^(%s)([1-9][0-9]*)?$" % "|".join(PREFIXES))
_KEY_NAMED = re.compile(r"^(%s)([a-zA-Z0-9_-]{1,64})?$" % "|".join(PREFIXES))

_RESOURCES_FORM = (
    "Badly formed resources parameter. Expected resources "
    "query string parameter in form: "
    "?resources=VCPU:2,MEMORY_MB:1024. Got: %s."
)


def getall(pairs: Iterable[tuple[str, str]], key: str) -> list[str]:
    return [v for k, v in pairs if k == key]


def parse_resources(value: str) -> dict[str, int]:
    """``VCPU:2,MEMORY_MB:1024`` -> {"VCPU": 2, "MEMORY_MB": 1024}."""
    if value.strip() == "":
        raise errors.BadRequest(_RESOURCES_FORM % "empty string")
    result: dict[str, int] = {}
    for item in value.split(","):
        parts = item.split(":")
        if len(parts) != 2:
            raise errors.BadRequest(_RESOURCES_FORM % item)
        name, raw = parts
        try:
            amount = int(raw)
        except ValueError:
            raise errors.BadRequest(
                "Requested resource %s expected positive integer amount. Got: %s." % (name, raw)
            ) from None
        if amount < 1:
            raise errors.BadRequest(
                "Requested resource %s requires amount >= 1. Got: %d." % (name, amount)
            )
        result[name] = amount
    return result


def parse_traits(
    value: str, *, allow_forbidden: bool, allow_any: bool
) -> tuple[list[frozenset[str]], set[str]]:
    """One ``required`` value -> (AND-list of OR-sets, forbidden names)."""
    if value.startswith("in:"):
        return [_parse_any_traits(value, allow_any)], set()
    names = [part.strip() for part in value.split(",")]
    # "!!X" means X, as upstream strips every leading "!".
    forbidden = {n.lstrip("!") for n in names if n.startswith("!")}
    if not all(names) or not all(forbidden):
        form = "HW_CPU_X86_VMX,!CUSTOM_MAGIC" if allow_forbidden else "HW_CPU_X86_VMX,CUSTOM_MAGIC"
        raise errors.BadRequest(
            "Invalid query string parameters: Expected 'required' parameter "
            "value of the form: %s. Got an empty trait in: %s" % (form, value)
        )
    if forbidden and not allow_forbidden:
        raise errors.BadRequest(
            "Invalid query string parameters: Expected 'required' parameter "
            "value of the form: HW_CPU_X86_VMX,CUSTOM_MAGIC. Got: %s" % value
        )
    required = [frozenset([n]) for n in names if not n.startswith("!")]
    return required, forbidden


def _parse_any_traits(value: str, allow_any: bool) -> frozenset[str]:
    if not allow_any:
        raise errors.BadRequest(
            "Invalid query string parameters: The format "
            "'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' only supported since "
            "microversion 1.39. Got: %s" % value
        )
    names = frozenset(part.strip() for part in value[3:].split(","))
    if not all(names):
        raise errors.BadRequest(
            "Invalid query string parameters: Expected 'required' parameter "
            "value of the form: in:HW_CPU_X86_VMX,CUSTOM_MAGIC. Got an empty "
            "trait in: %s" % value
        )
    if any(n.startswith("!") for n in names):
        raise errors.BadRequest(
            "Invalid query string parameters: The format "
            "'in:HW_CPU_X86_VMX,CUSTOM_MAGIC' does not support forbidden "
            "traits. Got: %s" % value
        )
    return names


def parse_required(values: list[str], want: Wants) -> tuple[TraitExpr, frozenset[str]]:
    """All ``required{suffix}`` values (repeatable from 1.39; before that
    the last one wins)."""
    allow_any = want("1.39")
    if not allow_any:
        values = values[-1:]
    required: list[frozenset[str]] = []
    forbidden: set[str] = set()
    for value in values:
        req, forb = parse_traits(value, allow_forbidden=want("1.22"), allow_any=allow_any)
        required += req
        forbidden |= forb
    return tuple(required), frozenset(forbidden)


def parse_member_of(
    values: list[str], suffix: str, want: Wants
) -> tuple[tuple[frozenset[str], ...], frozenset[str]]:
    """All ``member_of{suffix}`` values -> (AND-list of OR-sets, forbidden)."""
    if not want("1.24") and len(values) > 1:
        raise errors.BadRequest("Multiple member_of%s parameters are not supported" % suffix)
    required: list[frozenset[str]] = []
    forbidden: set[str] = set()
    for value in values:
        req, forb = _parse_one_member_of(value)
        if req:
            required.append(req)
        if forb:
            if not want("1.32"):
                raise errors.BadRequest(
                    "Forbidden member_of%s parameters are not supported in "
                    "the specified microversion" % suffix
                )
            forbidden |= forb
    return tuple(required), frozenset(forbidden)


def _parse_one_member_of(value: str) -> tuple[frozenset[str], frozenset[str]]:
    if "," in value and not value.startswith(("in:", "!in:")):
        raise errors.BadRequest(
            "Multiple values for 'member_of' must be prefixed with the 'in:' "
            "or '!in:' keyword using the valid microversion. Got: %s" % value
        )
    required: frozenset[str] = frozenset()
    forbidden: frozenset[str] = frozenset()
    if value.startswith("!in:"):
        forbidden = frozenset(value[4:].split(","))
    elif value.startswith("!"):
        forbidden = frozenset([value[1:]])
    elif value.startswith("in:"):
        required = frozenset(value[3:].split(","))
    else:
        required = frozenset([value])
    for agg in sorted(required | forbidden):
        if not common.is_uuid_like(agg):
            raise errors.BadRequest(
                "Invalid query string parameters: Expected 'member_of' "
                "parameter to contain valid UUID(s). Got: %s" % agg
            )
    return required, forbidden


def parse_in_tree(value: str) -> str:
    stripped = value.strip()
    if not common.is_uuid_like(stripped):
        raise errors.BadRequest(
            "Invalid query string parameters: Expected 'in_tree' parameter "
            "to be a format of uuid. Got: %s" % value
        )
    return stripped


def _group_fields(pairs: Pairs, want: Wants) -> dict[str, dict[str, object]]:
    """Suffix -> fields of its group, in order of first appearance."""
    pattern = _KEY_NAMED if want("1.33") else _KEY_NUMBERED
    found: dict[str, dict[str, object]] = {}
    for key, value in pairs:
        match = pattern.match(key)
        if not match:
            continue
        prefix, suffix = match.group(1), match.group(2) or ""
        fields = found.setdefault(suffix, {"suffix": suffix})
        if prefix == "resources":
            fields["resources"] = parse_resources(value)
        elif prefix == "required":
            fields["required"], fields["forbidden"] = parse_required(getall(pairs, key), want)
        elif prefix == "member_of":
            fields["member_of"], fields["forbidden_aggs"] = parse_member_of(
                getall(pairs, key), suffix, want
            )
        else:
            fields["in_tree"] = parse_in_tree(value)
    return found


def parse_groups(pairs: Pairs, want: Wants, wide: RequestWide) -> list[RequestGroup]:
    """The request groups, in order of first appearance, checked as
    upstream checks them for the request's microversion."""
    groups = [
        RequestGroup(**fields)  # type: ignore[arg-type]
        for fields in _group_fields(pairs, want).values()
    ]
    if want("1.36"):
        _check_resourceless(groups, wide)
    else:
        _check_orphans(groups)
    if want("1.22"):
        _check_conflicts(groups)
    return groups


def _check_orphans(groups: list[RequestGroup]) -> None:
    orphans = ["required" + g.suffix for g in groups if g.required and not g.resources]
    if orphans:
        raise errors.BadRequest(
            "All traits parameters must be associated with resources.  Found "
            "the following orphaned traits keys: %s" % ", ".join(orphans)
        )
    orphans = [
        "member_of" + g.suffix
        for g in groups
        if not g.resources and (g.member_of or g.forbidden_aggs)
    ]
    if orphans:
        raise errors.BadRequest(
            "All member_of parameters must be associated with resources. "
            "Found the following orphaned member_of keys: %s" % ", ".join(orphans)
        )
    if not all(g.resources for g in groups):
        raise errors.BadRequest("All request groups must specify resources.")
    if not groups:
        raise errors.BadRequest(
            "At least one request group (`resources` or `resources{$S}`) is required."
        )


def _check_resourceless(groups: list[RequestGroup], wide: RequestWide) -> None:
    resourceless = sorted(g.suffix for g in groups if not g.resources)
    if len(resourceless) == len(groups):
        raise errors.QueryMissingValue(
            "There must be at least one resources or resources[$S] parameter."
        )
    in_subtree: set[str] = set().union(*wide.same_subtrees)
    bad = [s for s in resourceless if s not in in_subtree]
    if bad:
        raise errors.QueryBadValue(
            "Resourceless suffixed group request should be specified in "
            "`same_subtree` query param: bad group(s) - %s." % bad
        )
    known = [g.suffix for g in groups]
    bad = sorted(s for s in in_subtree if s not in known)
    if bad:
        raise errors.QueryBadValue(
            "Real suffixes should be specified in `same_subtree`: %s not "
            "found in %s." % (bad, known)
        )


def _check_conflicts(groups: list[RequestGroup]) -> None:
    conflicts = sorted(
        "required%s: (%s)" % (g.suffix, ", ".join(sorted(any_of)))
        for g in groups
        for any_of in g.required
        if any_of <= g.forbidden
    )
    if conflicts:
        raise errors.BadRequest(
            "Conflicting required and forbidden traits found in the "
            "following traits keys: %s" % ", ".join(conflicts)
        )


def parse_wide(pairs: Pairs) -> RequestWide:
    """limit, group_policy, root_required and same_subtree."""
    limits = getall(pairs, "limit")
    policies = getall(pairs, "group_policy")
    required, forbidden = _parse_root_required(getall(pairs, "root_required"))
    subtrees: list[frozenset[str]] = []
    for value in getall(pairs, "same_subtree"):
        suffixes = frozenset(part.strip() for part in value.split(","))
        if "" in suffixes:
            raise errors.QueryBadValue(
                "Empty string (unsuffixed group) can not be specified in `same_subtree` "
            )
        subtrees.append(suffixes)
    # A limit beyond any possible answer means no limit (upstream accepts
    # any size of integer here).
    return RequestWide(
        limit=min(int(limits[0]), sys.maxsize) if limits else None,
        group_policy=policies[0] if policies else None,
        root_required=required,
        root_forbidden=forbidden,
        same_subtrees=tuple(subtrees),
    )


def _parse_root_required(values: list[str]) -> tuple[frozenset[str], frozenset[str]]:
    if not values:
        return frozenset(), frozenset()
    if len(values) > 1:
        raise errors.QueryDuplicateKey(
            "Query parameter 'root_required' may be specified only once."
        )
    # root_required never takes the any-of form, whatever the version.
    req, forbidden = parse_traits(values[0], allow_forbidden=True, allow_any=False)
    required = frozenset(n for any_of in req for n in any_of)
    conflicts = sorted(required & forbidden)
    if conflicts:
        raise errors.QueryBadValue(
            "Conflicting required and forbidden traits found in "
            "root_required: %s" % ", ".join(conflicts)
        )
    return required, frozenset(forbidden)


def parse_request(pairs: Pairs, want: Wants) -> tuple[list[RequestGroup], RequestWide]:
    """Groups and request-wide parameters of GET /allocation_candidates."""
    wide = parse_wide(pairs)
    groups = parse_groups(pairs, want, wide)
    if wide.group_policy is None and sum(g.same_provider for g in groups) > 1:
        raise errors.BadRequest(
            'The "group_policy" parameter is required when specifying more '
            'than one "resources{N}" parameter.'
        )
    return groups, wide
