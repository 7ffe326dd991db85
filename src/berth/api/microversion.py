"""Microversions: the list, parsing of the ``openstack-api-version``
header with microversion-parse, and the one test of a request's version
against a microversion (``at_least``; handlers call it through
``util.want``, the domain's query parsers through ``wants``)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import microversion_parse
from microversion_parse import Version

SERVICE_TYPE = "placement"
HEADER = "openstack-api-version"

VERSIONS: list[str] = [
    "1.0",  # Initial version: providers, inventories, usages, allocations.
    "1.1",  # Resource provider aggregates.
    "1.2",  # Custom resource classes.
    "1.3",  # member_of on GET /resource_providers.
    "1.4",  # resources filter on GET /resource_providers.
    "1.5",  # DELETE /resource_providers/{uuid}/inventories.
    "1.6",  # Traits.
    "1.7",  # PUT /resource_classes/{name} is create-or-validate.
    "1.8",  # project_id and user_id required on PUT /allocations.
    "1.9",  # GET /usages.
    "1.10",  # GET /allocation_candidates.
    "1.11",  # 'allocations' links on providers.
    "1.12",  # Dict-shaped PUT /allocations body.
    "1.13",  # POST /allocations for many consumers at once.
    "1.14",  # Nested providers: parent and root uuids, in_tree.
    "1.15",  # last-modified and cache-control headers.
    "1.16",  # limit on GET /allocation_candidates.
    "1.17",  # required traits on GET /allocation_candidates.
    "1.18",  # required traits on GET /resource_providers.
    "1.19",  # Aggregates carry the provider generation.
    "1.20",  # POST /resource_providers returns the provider.
    "1.21",  # member_of on GET /allocation_candidates.
    "1.22",  # Forbidden traits (!TRAIT).
    "1.23",  # Error codes in error bodies.
    "1.24",  # member_of may be repeated.
    "1.25",  # Granular request groups and group_policy.
    "1.26",  # reserved may equal total.
    "1.27",  # provider_summaries list every inventory class.
    "1.28",  # Consumer generations.
    "1.29",  # Nested providers in allocation candidates.
    "1.30",  # POST /reshaper.
    "1.31",  # in_tree on GET /allocation_candidates.
    "1.32",  # Forbidden aggregates (member_of=!...).
    "1.33",  # String suffixes on request groups.
    "1.34",  # Request-group mappings in allocation candidates.
    "1.35",  # root_required.
    "1.36",  # same_subtree and resourceless request groups.
    "1.37",  # Re-parenting providers.
    "1.38",  # Consumer types.
    "1.39",  # Any-of traits (in:) in required.
]

MAX = microversion_parse.parse_version_string(VERSIONS[-1])

#: "1.14" -> (1, 14) for every version in the list, parsed once: the test
#: below runs several times a request.
_PARSED: dict[str, tuple[int, int]] = {
    v: (int(v.split(".")[0]), int(v.split(".")[1])) for v in VERSIONS
}


class VersionError(Exception):
    """A bad header: ``status`` is 400 for a malformed value, 406 for one
    out of range; ``extra`` holds the fields the error body adds (the
    supported range, for a 406)."""

    def __init__(self, status: int, message: str, extra: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.extra = extra or {}


def extract(headers: dict[str, str]) -> Version:
    """The requested microversion, defaulting to the minimum.

    Raises VersionError worded as upstream's: "Invalid microversion: "
    and the parser's message, with the supported range on a 406.
    """
    try:
        return microversion_parse.extract_version(headers, SERVICE_TYPE, VERSIONS)
    except TypeError as exc:
        raise VersionError(400, "Invalid microversion: %s" % exc) from None
    except ValueError as exc:
        raise VersionError(
            406,
            "Invalid microversion: %s" % exc,
            {"max_version": VERSIONS[-1], "min_version": VERSIONS[0]},
        ) from None


def at_least(version: tuple[int, int], minimum: str) -> bool:
    """True when ``version`` (a request's, or any (major, minor) pair) is
    ``minimum`` (a listed version, as "1.29") or later: the one way the
    API layer asks what a microversion brings. KeyError for a version
    not in ``VERSIONS``."""
    return version >= _PARSED[minimum]


def wants(version: tuple[int, int]) -> Callable[[str], bool]:
    """``at_least`` bound to ``version``: the test the domain's query
    parsers take (``parse.Wants``), so that they never compare versions
    themselves."""
    return functools.partial(at_least, version)


def parse(text: str) -> tuple[int, int]:
    """A listed version ("1.14") as a comparable (major, minor) pair;
    KeyError for a version not in ``VERSIONS``."""
    return _PARSED[text]


def header_value(version: Version) -> str:
    return "%s %s" % (SERVICE_TYPE, version)
