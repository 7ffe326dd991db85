"""Handlers for /resource_classes and /resource_classes/{name} (1.2+)."""

from __future__ import annotations

from typing import Any

import falcon

from berth.api import util
from berth.api.schemas import resource_class as schema
from berth.domain import resource_class as classes

POLICY = "placement:resource_classes:%s"


def _path(req: falcon.Request, name: str) -> str:
    return "%s/resource_classes/%s" % (req.root_path, name)


def _body(req: falcon.Request, rc: classes.ResourceClass) -> dict[str, Any]:
    return {"name": rc.name, "links": [{"rel": "self", "href": _path(req, rc.name)}]}


def _created(req: falcon.Request, resp: falcon.Response, name: str, status: int) -> None:
    resp.status = status
    resp.data = b""
    resp.location = req.prefix + "/resource_classes/" + name


def _custom_name(req: falcon.Request) -> str:
    """The validated ``name`` of a JSON body."""
    name: str = util.json_body(req, schema.NAME_BODY_V)["name"]
    schema.check_strict(name)
    return name


def list_classes(req: falcon.Request, resp: falcon.Response) -> None:
    """200 with every resource class, standard and custom; 403 unless
    policy allows the caller; 406 when the client cannot take JSON."""
    util.check_accept(req)
    util.authorize(req, POLICY % "list")
    found = util.db(req).read(classes.list_classes)
    # Standard classes carry no timestamp, so the answer is "now" when
    # any is listed (always, in practice), as upstream answers.
    when = None
    if all(rc.modified is not None for rc in found):
        when = util.newest(rc.modified for rc in found)
    util.send(req, resp, {"resource_classes": [_body(req, rc) for rc in found]}, last_modified=when)


def get_class(req: falcon.Request, resp: falcon.Response, name: str) -> None:
    """200 with the class; 403 unless policy allows the caller; 404
    when there is no such class; 406 when the client cannot take JSON."""
    util.check_accept(req)
    util.authorize(req, POLICY % "show")
    rc = util.db(req).read(lambda conn: classes.get_class(conn, name))
    util.send(req, resp, _body(req, rc), last_modified=rc.modified)


def create_class(req: falcon.Request, resp: falcon.Response) -> None:
    """201 with its location; 400 for a body the schema refuses (the
    name must be CUSTOM_...); 403 unless policy allows the caller; 409
    when the class exists; 415 unless the body is JSON."""
    util.require_json(req)
    util.authorize(req, POLICY % "create")
    name = _custom_name(req)
    util.db(req).run(lambda conn: classes.create_class(conn, name))
    _created(req, resp, name, 201)


def update_class(req: falcon.Request, resp: falcon.Response, name: str) -> None:
    """Before 1.7 a rename: 200 with the class under its new name; 400
    for a body the schema refuses or a standard class; 404 when there is
    no such class; 409 when the new name is taken; 415 unless the body is
    JSON. From 1.7 an idempotent create: 201 when created, 204 when it
    existed (both with its location); 400 for a name that is not
    CUSTOM_.... Both: 403 unless policy allows the caller."""
    if not util.want(req, "1.7"):
        _rename(req, resp, name)
        return
    util.authorize(req, POLICY % "update")
    util.check_body(schema.NAME_BODY_V, {"name": name})
    schema.check_strict(name)
    created = util.db(req).run(lambda conn: classes.ensure_class(conn, name))
    _created(req, resp, name, 201 if created else 204)


def _rename(req: falcon.Request, resp: falcon.Response, name: str) -> None:
    util.require_json(req)
    util.authorize(req, POLICY % "update")
    new_name = _custom_name(req)
    util.db(req).run(lambda conn: classes.rename_class(conn, name, new_name))
    util.send(req, resp, _body(req, classes.ResourceClass(new_name, None)), cache=False)


def delete_class(req: falcon.Request, resp: falcon.Response, name: str) -> None:
    """204; 400 for a standard class; 403 unless policy allows the
    caller; 404 when there is no such class; 409 when an inventory or
    allocation uses it."""
    util.authorize(req, POLICY % "delete")
    util.db(req).run(lambda conn: classes.delete_class(conn, name))
    util.no_content(resp)
