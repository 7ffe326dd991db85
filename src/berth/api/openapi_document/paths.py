"""One operation of the OpenAPI document (``operation``): its
parameters, its answers and its body, from the routes table's row (the
microversion the route starts at) and the operation's ``OPERATIONS``
entry. A body or query whose schema changes with the microversion is
described as ``anyOf`` one schema per range, each titled with its range.
"""

from __future__ import annotations

import copy
from typing import Any

from berth.api import microversion
from berth.api.openapi_document.components import COMMON_ERRORS, ERROR_TEXT, headers
from berth.api.openapi_document.describe import IGNORED, Operation, operation_id
from berth.api.openapi_document.operations import OPERATIONS
from berth.api.render import JSON
from berth.api.schemas import Versioned


def _minimum(spec: Any) -> str:
    if isinstance(spec, tuple):
        return str(spec[1])
    return microversion.VERSIONS[0]


def _ranges(schemas: Versioned) -> list[tuple[str, dict[str, Any]]]:
    """(``"1.x - 1.y"``, schema) per range, oldest first."""
    ordered = sorted(schemas, key=lambda pair: microversion.parse(pair[0]))
    out = []
    for i, (since, validator) in enumerate(ordered):
        last = microversion.VERSIONS[-1] if i + 1 == len(ordered) else _previous(ordered[i + 1][0])
        out.append(("%s - %s" % (since, last), dict(validator.schema)))  # type: ignore[arg-type]
    return out


def _previous(version: str) -> str:
    index = microversion.VERSIONS.index(version)
    return microversion.VERSIONS[index - 1]


def _combined(schemas: Versioned) -> dict[str, Any]:
    ranges = _ranges(schemas)
    if len(ranges) == 1:
        return ranges[0][1]
    return {"anyOf": [{**schema, "title": "microversions " + label} for label, schema in ranges]}


def _query_parameters(schemas: Versioned, words: dict[str, str]) -> list[dict[str, Any]]:
    """One parameter per query key any microversion accepts; suffixed
    group keys (patternProperties) appear under their plain name.
    Required when every microversion's schema requires it. Described by
    ``words`` or the schema's own description (Berth's parameters), else
    by the microversion it appears in (upstream's)."""
    found: dict[str, dict[str, Any]] = {}
    since: dict[str, str] = {}
    required: set[str] | None = None
    for label, schema in _ranges(schemas):
        keys = dict(schema.get("properties", {}))
        for pattern, spec in schema.get("patternProperties", {}).items():
            keys[pattern.lstrip("^").split("(")[0]] = spec
        for name, spec in keys.items():
            found[name] = spec
            since.setdefault(name, label.split(" ")[0])
        wanted = set(schema.get("required", ()))
        required = wanted if required is None else required & wanted
    return [
        {
            "name": name,
            "in": "query",
            "required": name in (required or ()),
            "schema": {"type": "string"} if spec.get("type") != "string" else spec,
            "description": words.get(name)
            or spec.get("description")
            or "From microversion %s." % since[name],
        }
        for name, spec in sorted(found.items())
    ]


def _path_parameters(template: str) -> list[dict[str, Any]]:
    names = [part[1:-1] for part in template.split("/") if part.startswith("{")]
    return [
        {"name": n, "in": "path", "required": True, "schema": {"type": "string"}} for n in names
    ]


def _success(op: Operation, read: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for status, schema in sorted(op.ok.items()):
        reply: dict[str, Any] = {
            "description": "Success.",
            "headers": headers(cached=op.cached and schema is not None, read=read),
        }
        if op.served_by:  # no microversion, no position: the request id
            reply["headers"] = {
                name: ref
                for name, ref in reply["headers"].items()
                if name == "x-openstack-request-id"
            }
        if op.media is not None and schema is not None:
            reply["content"] = copy.deepcopy(op.media)
        elif schema is not None:
            reply["content"] = {JSON: {"schema": copy.deepcopy(schema)}}
        if status in op.links:
            reply["links"] = op.links[status]
        out[str(status)] = reply
    return out


def _errors(op: Operation, spec: Any) -> dict[str, Any]:
    """The operation's error answers, by status, then ``default``."""
    statuses = set(op.errors) | ({400, 406} if op.public else set(COMMON_ERRORS))
    if isinstance(spec, tuple):  # below its microversion: 404 (or 405)
        statuses.add(spec[2] if len(spec) > 2 else 404)
    out: dict[str, Any] = {}
    for status in sorted(statuses):
        if status == 304:  # no body
            out["304"] = {"description": ERROR_TEXT[304]}
            continue
        out[str(status)] = {"$ref": "#/components/responses/E%d" % status}
    out["default"] = {"$ref": "#/components/responses/Error"}
    return out


def operation(template: str, method: str, spec: Any) -> dict[str, Any]:
    """The document's entry for ``method`` on route ``template``, whose
    row in the routes table is ``spec``; KeyError when ``OPERATIONS``
    has no entry for it."""
    op = OPERATIONS[(template, method)]
    doc: dict[str, Any] = {
        "operationId": operation_id(method, template),
        "summary": op.summary,
        "x-openstack-microversion": {"min": _minimum(spec), "max": microversion.VERSIONS[-1]},
        "parameters": (
            _path_parameters(template)
            + ([] if op.served_by else [{"$ref": "#/components/parameters/ApiVersion"}])
            + _query_parameters(op.query, op.words)
        ),
        "responses": {**_success(op, method in ("GET", "HEAD")), **_errors(op, spec)},
    }
    if op.description:
        doc["description"] = op.description
    if op.served_by:
        doc["x-berth-served-by"] = op.served_by
    if op.body:
        # Required unless some microversion range does not read it.
        doc["requestBody"] = {
            "required": all(v is not IGNORED for _, v in op.body),
            "content": {JSON: {"schema": _combined(op.body)}},
        }
    if op.public:
        doc["security"] = []
    elif op.token_optional:
        doc["security"] = [{"token": []}, {}]
    return doc
