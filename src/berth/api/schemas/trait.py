"""JSON Schemas for traits (from microversion 1.6)."""

from __future__ import annotations

from typing import Any

from berth.api.schemas import validator

TRAIT: dict[str, Any] = {"type": "string", "minLength": 1, "maxLength": 255}
CUSTOM_TRAIT: dict[str, Any] = {**TRAIT, "pattern": "^CUSTOM_[A-Z0-9_]+$"}

#: PUT /resource_providers/{uuid}/traits
SET_PROVIDER_TRAITS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "traits": {"type": "array", "items": TRAIT},
        "resource_provider_generation": {"type": "integer"},
    },
    "required": ["traits", "resource_provider_generation"],
    "additionalProperties": False,
}

#: GET /traits query string
LIST_QUERY: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string"},
        "associated": {"type": "string"},
    },
    "additionalProperties": False,
}

CUSTOM_TRAIT_V = validator(CUSTOM_TRAIT)
SET_PROVIDER_TRAITS_V = validator(SET_PROVIDER_TRAITS)
LIST_QUERY_V = validator(LIST_QUERY)
