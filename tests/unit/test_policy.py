"""Policy names and defaults, legacy and secure RBAC."""

from __future__ import annotations

import pytest
from oslo_context import context

from berth import policy
from berth.api.handlers.change import EVERY_PROJECT
from berth.domain.errors import Forbidden
from tests.conftest import make_conf

UPSTREAM_RULES = {
    "admin_api",
    "service_api",
    "admin_or_service_api",
    "project_reader_api",
    "admin_or_project_reader_or_service_api",
    *(
        "placement:resource_providers:%s" % a
        for a in ("list", "create", "show", "update", "delete")
    ),
    *("placement:resource_classes:%s" % a for a in ("list", "create", "show", "update", "delete")),
    *(
        "placement:resource_providers:inventories:%s" % a
        for a in ("list", "create", "show", "update", "delete")
    ),
    "placement:resource_providers:aggregates:list",
    "placement:resource_providers:aggregates:update",
    "placement:resource_providers:usages",
    "placement:usages",
    *("placement:traits:%s" % a for a in ("list", "show", "update", "delete")),
    *("placement:resource_providers:traits:%s" % a for a in ("list", "update", "delete")),
    *("placement:allocations:%s" % a for a in ("manage", "list", "update", "delete")),
    "placement:resource_providers:allocations:list",
    "placement:allocation_candidates:list",
    "placement:reshaper:reshape",
}


#: Berth's own endpoints (docs/explain-and-fit.md), admin only.
BERTH_ADMIN_RULES = {
    "berth:explain",
    "berth:fit",
    "berth:healthcheck:details",
    "berth:metrics:show",
    "berth:dashboard",
}
BERTH_RULES = BERTH_ADMIN_RULES | {"berth:changes:list"}


def test_rule_names_match_upstream():
    assert {r.name for r in policy.rule_defaults()} == (UPSTREAM_RULES | BERTH_RULES)


@pytest.mark.parametrize("rule", sorted(BERTH_ADMIN_RULES))
@pytest.mark.parametrize("new_defaults", [False, True])
def test_berth_rules_are_admin_only(rule, new_defaults):
    pol = policy.Policy(make_conf(oslo_policy__enforce_new_defaults=new_defaults))
    pol.authorize(_ctx(["admin"]), rule)
    for roles in (["service"], ["reader", "member"]):
        with pytest.raises(Forbidden):
            pol.authorize(_ctx(roles), rule)


def _ctx(roles, project="p1", system=None):
    return context.RequestContext(user_id="u", project_id=project, roles=roles, system_scope=system)


@pytest.mark.parametrize("new_defaults", [False, True])
def test_admin_may_and_reader_may_not(new_defaults):
    pol = policy.Policy(make_conf(oslo_policy__enforce_new_defaults=new_defaults))
    pol.authorize(_ctx(["admin"]), "placement:resource_providers:list")
    with pytest.raises(Forbidden):
        pol.authorize(_ctx(["reader"]), "placement:resource_providers:list")


def test_service_role_only_with_new_defaults():
    legacy = policy.Policy(make_conf(oslo_policy__enforce_new_defaults=False))
    secure = policy.Policy(make_conf(oslo_policy__enforce_new_defaults=True))
    # Legacy defaults OR the deprecated admin rule in, so service passes in
    # both; reshaping is service-only in secure RBAC.
    secure.authorize(_ctx(["service"]), "placement:reshaper:reshape")
    legacy.authorize(_ctx(["admin"]), "placement:reshaper:reshape")
    with pytest.raises(Forbidden):
        secure.authorize(_ctx(["admin"]), "placement:reshaper:reshape")


def test_system_scope_is_rejected():
    pol = policy.Policy(make_conf())
    with pytest.raises(Forbidden):
        pol.authorize(
            _ctx(["admin"], project=None, system="all"), "placement:resource_providers:list"
        )


def test_project_reader_reads_own_usages_only():
    pol = policy.Policy(make_conf(oslo_policy__enforce_new_defaults=True))
    ctx = _ctx(["reader"], project="p1")
    pol.authorize(ctx, "placement:usages", {"project_id": "p1", "user_id": None})
    with pytest.raises(Forbidden):
        pol.authorize(ctx, "placement:usages", {"project_id": "p2", "user_id": None})


@pytest.mark.parametrize("new_defaults", [False, True])
def test_change_feed_rule(new_defaults):
    """Admins and services read the whole feed; a project's reader only
    with its own project as the target (the handler then narrows the
    events to that project's consumers); others nothing."""
    pol = policy.Policy(make_conf(oslo_policy__enforce_new_defaults=new_defaults))
    whole = {"project_id": EVERY_PROJECT, "user_id": None}
    rule = "berth:changes:list"
    pol.authorize(_ctx(["admin"]), rule, whole)
    pol.authorize(_ctx(["service"]), rule, whole)
    reader = _ctx(["reader"], project="p1")
    with pytest.raises(Forbidden):
        pol.authorize(reader, rule, whole)
    pol.authorize(reader, rule, {"project_id": "p1", "user_id": None})
    with pytest.raises(Forbidden):
        pol.authorize(reader, rule, {"project_id": "p2", "user_id": None})
    with pytest.raises(Forbidden):
        pol.authorize(_ctx([], project="p1"), rule, {"project_id": "p1", "user_id": None})
    # A reader with no project (system-scoped, where scopes are not
    # enforced) matches no project: not the whole feed's target either.
    loose = policy.Policy(
        make_conf(oslo_policy__enforce_new_defaults=new_defaults, oslo_policy__enforce_scope=False)
    )
    with pytest.raises(Forbidden):
        loose.authorize(_ctx(["reader"], project=None, system="all"), rule, whole)


def test_policy_file_overrides(tmp_path):
    path = tmp_path / "policy.yaml"
    path.write_text('"placement:resource_providers:list": "@"\n')
    pol = policy.Policy(make_conf(oslo_policy__policy_file=str(path)))
    pol.authorize(_ctx([]), "placement:resource_providers:list")


def test_policy_file_changes_are_picked_up(tmp_path, monkeypatch):
    import os

    monkeypatch.setattr(policy, "RELOAD_INTERVAL", 0.0)
    path = tmp_path / "policy.yaml"
    path.write_text('"placement:resource_providers:list": "@"\n')
    pol = policy.Policy(make_conf(oslo_policy__policy_file=str(path)))
    pol.authorize(_ctx([]), "placement:resource_providers:list")
    path.write_text('"placement:resource_providers:list": "!"\n')
    stat = path.stat()
    os.utime(path, (stat.st_atime, stat.st_mtime + 5))
    with pytest.raises(Forbidden):
        pol.authorize(_ctx([]), "placement:resource_providers:list")
