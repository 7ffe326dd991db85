"""Handlers for /resource_providers/{uuid}/inventories[/{resource_class}]."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import falcon

from berth.api import util
from berth.api.errors import HTTPProblem
from berth.api.schemas import inventory as schema
from berth.domain import common, inventory, inventory_read
from berth.domain.capacity import Inventory

POLICY = "placement:resource_providers:inventories:%s"
T = TypeVar("T")


def _one(inv: Inventory, generation: int) -> dict[str, Any]:
    data: dict[str, Any] = {f: getattr(inv, f) for f in inventory_read.FIELDS}
    # Upstream leaves out a generation of 0 (a falsy value).
    if generation:
        data["resource_provider_generation"] = generation
    return data


def _many(invs: dict[str, Inventory], generation: int) -> dict[str, Any]:
    return {
        "resource_provider_generation": generation,
        "inventories": {rc: _one(inv, 0) for rc, inv in invs.items()},
    }


def _reserved_can_be_total(req: falcon.Request) -> bool:
    return util.want(req, "1.26")


def list_inventories(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    """200 with the provider's inventories and generation; 403 unless
    policy allows the caller; 404 when no provider has that uuid; 406
    when the client cannot take JSON."""
    util.check_accept(req)
    util.authorize(req, POLICY % "list")
    found = util.db(req).read(lambda conn: inventory_read.list_inventories(conn, uuid))
    util.send(
        req, resp, _many(found.inventories, found.generation), last_modified=found.last_modified
    )


def get_inventory(
    req: falcon.Request, resp: falcon.Response, uuid: str, resource_class: str
) -> None:
    """200 with the inventory and the provider generation; 403 unless
    policy allows the caller; 404 when no provider has that uuid or it
    has no inventory of that class; 406 when the client cannot take
    JSON."""
    util.check_accept(req)
    util.authorize(req, POLICY % "show")
    inv, generation, modified = util.db(req).read(
        lambda conn: inventory_read.get_inventory(conn, uuid, resource_class)
    )
    util.send(req, resp, _one(inv, generation), last_modified=modified)


def _write_body(
    req: falcon.Request, uuid: str, rule: str, validator: Any, parse: Callable[[dict[str, Any]], T]
) -> tuple[dict[str, Any], T]:
    """The checks every inventory write makes before touching anything, in
    upstream's order: 415, 403, 404 for the provider, then 400; the body
    and what ``parse`` makes of it."""
    util.require_json(req)
    util.authorize(req, POLICY % rule)

    def checked() -> tuple[dict[str, Any], T]:
        data: dict[str, Any] = util.json_body(req, validator)
        return data, parse(data)

    return util.parse_or_not_found(req, checked, lambda conn: common.require_provider(conn, uuid))


def create_inventory(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    """201 with the inventory and its location; 400 for a body the
    schema refuses, an unknown class or amounts that leave no capacity;
    403 unless policy allows the caller; 404 when no provider has that
    uuid; 409 when it has that class already or changed meanwhile; 415
    unless the body is JSON."""
    data, inv = _write_body(req, uuid, "create", schema.POST_V, inventory.make_inventory)
    rc = data["resource_class"]
    generation = util.db(req).run(
        lambda conn: inventory.add_inventory(
            conn, uuid, rc, inv, reserved_can_be_total=_reserved_can_be_total(req)
        )
    )
    resp.location = "%s/resource_providers/%s/inventories/%s" % (req.prefix, uuid, rc)
    util.send(req, resp, _one(inv, generation), status=201)


def update_inventory(
    req: falcon.Request, resp: falcon.Response, uuid: str, resource_class: str
) -> None:
    """200 with the inventory and the new generation; 400 for a body
    the schema refuses, an unknown class, a class the provider has no
    inventory of, or amounts that leave no capacity; 403 unless policy
    allows the caller; 404 when no provider has that uuid; 409 when the
    generation is stale; 415 unless the body is JSON."""
    data, inv = _write_body(req, uuid, "update", schema.PUT_ONE_V, inventory.make_inventory)
    generation = util.db(req).run(
        lambda conn: inventory.update_inventory(
            conn,
            uuid,
            resource_class,
            inv,
            data["resource_provider_generation"],
            reserved_can_be_total=_reserved_can_be_total(req),
        )
    )
    util.send(req, resp, _one(inv, generation))


def replace_inventories(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    """200 with the inventories and the new generation; 400 for a
    body the schema refuses, an unknown class or amounts that leave no
    capacity; 403 unless policy allows the caller; 404 when no provider
    has that uuid; 409 when the generation is stale or a class it
    removes is still allocated; 415 unless the body is JSON."""
    data, invs = _write_body(
        req, uuid, "update", schema.PUT_ALL_V, lambda data: _parse_all(uuid, data["inventories"])
    )
    generation = util.db(req).run(
        lambda conn: inventory.replace_inventories(
            conn,
            uuid,
            invs,
            data["resource_provider_generation"],
            reserved_can_be_total=_reserved_can_be_total(req),
        )
    )
    util.send(req, resp, _many(invs, generation))


def _parse_all(uuid: str, raw: dict[str, Any]) -> dict[str, Inventory]:
    """Inventories by class; a class name outside the schema's pattern was
    not validated and names no class, so it is refused here."""
    invs: dict[str, Inventory] = {}
    for rc, data in raw.items():
        if not schema.is_class_name(rc) or not isinstance(data, dict):
            raise HTTPProblem(
                400,
                "Unknown resource class in inventory for "
                "resource provider %s: No such resource class "
                "%s." % (uuid, rc),
            )
        invs[rc] = inventory.make_inventory(data)
    return invs


def delete_inventories(req: falcon.Request, resp: falcon.Response, uuid: str) -> None:
    """204 (from 1.5); 403 unless policy allows the caller; 404
    when no provider has that uuid; 409 when a class is still allocated
    or the provider changed meanwhile."""
    util.authorize(req, POLICY % "delete")
    util.db(req).run(lambda conn: inventory.delete_inventories(conn, uuid))
    util.no_content(resp)


def delete_inventory(
    req: falcon.Request, resp: falcon.Response, uuid: str, resource_class: str
) -> None:
    """204; 403 unless policy allows the caller; 404 when no provider
    has that uuid or it has no inventory of that class; 409 when the
    class is still allocated or the provider changed meanwhile."""
    util.authorize(req, POLICY % "delete")
    util.db(req).run(lambda conn: inventory.delete_inventory(conn, uuid, resource_class))
    util.no_content(resp)
