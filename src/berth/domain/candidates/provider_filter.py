"""The ``resources``, ``required`` and ``member_of`` filters of
GET /resource_providers, on the candidate engine's parsing and matching."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from berth.domain.candidates import load, parse
from berth.domain.candidates.model import Provider, provider_matches
from berth.domain.candidates.request import TraitExpr

FILTER_KEYS = ("resources", "required", "member_of")


def filter_provider_ids(conn: Connection, pairs: list[tuple[str, str]],
                        version: tuple[int, int]) -> set[int] | None:
    """Ids of providers that by themselves satisfy the filters in ``pairs``.

    None when no filter parameter is present. Raises BadRequest (upstream's
    messages) for malformed values, unknown classes or unknown traits.
    """
    keys = {k for k, _ in pairs}
    if not keys.intersection(FILTER_KEYS):
        return None
    # Checked in upstream's order: member_of, resources, required.
    member_of: tuple[frozenset[str], ...] = ()
    forbidden_aggs: frozenset[str] = frozenset()
    if "member_of" in keys:
        member_of, forbidden_aggs = parse.parse_member_of(
            parse.getall(pairs, "member_of"), "", version)
    resources: dict[str, int] = {}
    if "resources" in keys:
        resources = parse.parse_resources(parse.getall(pairs, "resources")[-1])
    required: TraitExpr = ()
    forbidden: frozenset[str] = frozenset()
    if "required" in keys:
        required, forbidden = parse.parse_required(
            parse.getall(pairs, "required"), version)
    rc_ids = load.class_ids(conn, resources)
    names = set(forbidden).union(*required)
    tmap = load.trait_ids(conn, names, 'Invalid trait(s) in "required" '
                          'parameter: ')
    invs = load.inventories(conn, rc_ids) if rc_ids else {}
    traits = load.traits_of(conn, tmap)
    aggs = load.aggregates_of(conn, set(forbidden_aggs).union(*member_of))
    if rc_ids:
        ids = set(invs)
    elif required:
        ids = set(traits)
    elif member_of:
        ids = set(aggs)
    else:
        ids = {row[0] for row in load.provider_rows(conn, None)}
    found = set()
    for pid in ids:
        inv, used = invs.get(pid, ({}, {}))
        p = Provider(id=pid, uuid="", root_id=pid, inventories=inv, used=used,
                     traits=frozenset(traits.get(pid, ())),
                     aggregates=frozenset(aggs.get(pid, ())))
        if provider_matches(p, resources, required, forbidden, member_of,
                            forbidden_aggs):
            found.add(pid)
    return found
