"""The ``resources``, ``required`` and ``member_of`` filters of
GET /resource_providers, on the candidate engine's parsing, world and
matching."""

from __future__ import annotations

from sqlalchemy.engine import Connection

from berth.domain.allocation_candidate import load, parse
from berth.domain.allocation_candidate.cache import CandidateCache
from berth.domain.allocation_candidate.request import RequestGroup, TraitExpr
from berth.domain.allocation_candidate.world import World

FILTER_KEYS = ("resources", "required", "member_of")


def filter_provider_ids(
    conn: Connection, cache: CandidateCache, pairs: list[tuple[str, str]], want: parse.Wants
) -> set[int] | None:
    """Ids of providers that by themselves satisfy the filters in ``pairs``.

    None when no filter parameter is present. Raises BadRequest (upstream's
    messages) for malformed values, unknown classes or unknown traits.
    """
    keys = {k for k, _ in pairs}
    if not keys.intersection(FILTER_KEYS):
        return None
    wanted = _filters(pairs, keys, want)
    cached = cache.current(conn)
    load.class_ids(wanted.resources, cached.class_ids(conn, wanted.resources))
    names = wanted.trait_names
    load.trait_ids(
        names, cached.trait_ids(conn, names), 'Invalid trait(s) in "required" parameter: '
    )
    ids = _labelled(cached.world, wanted)
    if not wanted.resources:
        return ids
    return _with_room(cached.world, ids, wanted.resources)


def _filters(pairs: list[tuple[str, str]], keys: set[str], want: parse.Wants) -> RequestGroup:
    """The filters in ``pairs`` (whose parameter names are ``keys``) as
    one request group. Raises BadRequest for a malformed value, checked
    in upstream's order: member_of, resources, required."""
    member_of: tuple[frozenset[str], ...] = ()
    forbidden_aggs: frozenset[str] = frozenset()
    if "member_of" in keys:
        member_of, forbidden_aggs = parse.parse_member_of(
            parse.getall(pairs, "member_of"), "", want
        )
    resources: dict[str, int] = {}
    if "resources" in keys:
        resources = parse.parse_resources(parse.getall(pairs, "resources")[-1])
    required: TraitExpr = ()
    forbidden: frozenset[str] = frozenset()
    if "required" in keys:
        required, forbidden = parse.parse_required(parse.getall(pairs, "required"), want)
    return RequestGroup("", resources, required, forbidden, member_of, forbidden_aggs)


def _labelled(world: World, wanted: RequestGroup) -> set[int]:
    """The providers with the traits and aggregates ``wanted`` asks for,
    and inventory of its first class (if it asks for any)."""
    # Traits and aggregates are set algebra on the world's indexes; only
    # amounts need each provider looked at.
    ids: set[int] | None = None
    for index, any_ofs in ((world.by_trait, wanted.required), (world.by_agg, wanted.member_of)):
        for any_of in any_ofs:
            found = set().union(*(index.get(n, ()) for n in any_of))
            ids = found if ids is None else ids & found
    if wanted.resources:
        first = world.by_class.get(next(iter(wanted.resources)), [])
        ids = set(first) if ids is None else ids.intersection(first)
    if ids is None:
        ids = set(world.providers)
    for name in wanted.forbidden:
        ids -= world.by_trait.get(name, set())
    for agg in wanted.forbidden_aggs:
        ids -= world.by_agg.get(agg, set())
    return ids


def _with_room(world: World, ids: set[int], resources: dict[str, int]) -> set[int]:
    """Those of ``ids`` with room for every amount of ``resources``."""
    providers = world.providers
    amounts = list(resources.items())
    fit = set()
    for pid in ids:
        # Provider.can_take for each class, inlined (thousands of calls).
        room = providers[pid].room
        for rc, n in amounts:
            r = room.get(rc)
            if r is None or n < r[1] or n > r[2] or n % r[3] or n > r[0]:
                break
        else:
            fit.add(pid)
    return fit
