"""Policy: upstream Placement's rule names and defaults, on oslo.policy.

Legacy defaults (``role:admin``) stay in force while ``[oslo_policy]
enforce_new_defaults`` is False, exactly as upstream registers them as
deprecated rules.
"""

from __future__ import annotations

import time

from oslo_config import cfg
from oslo_context import context as oslo_context
from oslo_policy import policy

from berth.domain.errors import Forbidden

_DEPRECATED_REASON = (
    "Placement policies gained new default roles with "
    "scope types; the old admin-only defaults are "
    "deprecated."
)
_DEPRECATED_ADMIN = policy.DeprecatedRule(
    name="rule:admin_api",
    check_str="role:admin",
    deprecated_reason=_DEPRECATED_REASON,
    deprecated_since="W",
)

ADMIN_OR_SERVICE = "rule:admin_or_service_api"
SERVICE = "rule:service_api"
ADMIN_OR_PROJECT_READER_OR_SERVICE = "rule:admin_or_project_reader_or_service_api"

BASE_RULES: list[tuple[str, str, str]] = [
    ("admin_api", "role:admin", "Default rule for most placement APIs."),
    ("service_api", "role:service", "Default rule for service-to-service placement APIs."),
    ("admin_or_service_api", "role:admin or role:service", "Default rule for most placement APIs."),
    (
        "project_reader_api",
        "role:reader and project_id:%(project_id)s",
        "Default rule for Project level reader APIs.",
    ),
    (
        "admin_or_project_reader_or_service_api",
        "role:admin or rule:project_reader_api or role:service",
        "Default rule for project level reader APIs.",
    ),
]

RP = "/resource_providers"
RPU = RP + "/{uuid}"
# (name, check, description, [(method, path), ...])
API_RULES: list[tuple[str, str, str, list[tuple[str, str]]]] = [
    (
        "placement:resource_providers:list",
        ADMIN_OR_SERVICE,
        "List resource providers.",
        [("GET", RP)],
    ),
    (
        "placement:resource_providers:create",
        ADMIN_OR_SERVICE,
        "Create resource provider.",
        [("POST", RP)],
    ),
    (
        "placement:resource_providers:show",
        ADMIN_OR_SERVICE,
        "Show resource provider.",
        [("GET", RPU)],
    ),
    (
        "placement:resource_providers:update",
        ADMIN_OR_SERVICE,
        "Update resource provider.",
        [("PUT", RPU)],
    ),
    (
        "placement:resource_providers:delete",
        ADMIN_OR_SERVICE,
        "Delete resource provider.",
        [("DELETE", RPU)],
    ),
    (
        "placement:resource_classes:list",
        ADMIN_OR_SERVICE,
        "List resource classes.",
        [("GET", "/resource_classes")],
    ),
    (
        "placement:resource_classes:create",
        ADMIN_OR_SERVICE,
        "Create resource class.",
        [("POST", "/resource_classes")],
    ),
    (
        "placement:resource_classes:show",
        ADMIN_OR_SERVICE,
        "Show resource class.",
        [("GET", "/resource_classes/{name}")],
    ),
    (
        "placement:resource_classes:update",
        ADMIN_OR_SERVICE,
        "Update resource class.",
        [("PUT", "/resource_classes/{name}")],
    ),
    (
        "placement:resource_classes:delete",
        ADMIN_OR_SERVICE,
        "Delete resource class.",
        [("DELETE", "/resource_classes/{name}")],
    ),
    (
        "placement:resource_providers:inventories:list",
        ADMIN_OR_SERVICE,
        "List resource provider inventories.",
        [("GET", RPU + "/inventories")],
    ),
    (
        "placement:resource_providers:inventories:create",
        ADMIN_OR_SERVICE,
        "Create one resource provider inventory.",
        [("POST", RPU + "/inventories")],
    ),
    (
        "placement:resource_providers:inventories:show",
        ADMIN_OR_SERVICE,
        "Show resource provider inventory.",
        [("GET", RPU + "/inventories/{resource_class}")],
    ),
    (
        "placement:resource_providers:inventories:update",
        ADMIN_OR_SERVICE,
        "Update resource provider inventory.",
        [("PUT", RPU + "/inventories"), ("PUT", RPU + "/inventories/{resource_class}")],
    ),
    (
        "placement:resource_providers:inventories:delete",
        ADMIN_OR_SERVICE,
        "Delete resource provider inventory.",
        [("DELETE", RPU + "/inventories"), ("DELETE", RPU + "/inventories/{resource_class}")],
    ),
    (
        "placement:resource_providers:aggregates:list",
        ADMIN_OR_SERVICE,
        "List resource provider aggregates.",
        [("GET", RPU + "/aggregates")],
    ),
    (
        "placement:resource_providers:aggregates:update",
        ADMIN_OR_SERVICE,
        "Update resource provider aggregates.",
        [("PUT", RPU + "/aggregates")],
    ),
    (
        "placement:resource_providers:usages",
        ADMIN_OR_SERVICE,
        "List resource provider usages.",
        [("GET", RPU + "/usages")],
    ),
    (
        "placement:usages",
        ADMIN_OR_PROJECT_READER_OR_SERVICE,
        "List total resource usages for a given project.",
        [("GET", "/usages")],
    ),
    ("placement:traits:list", ADMIN_OR_SERVICE, "List traits.", [("GET", "/traits")]),
    ("placement:traits:show", ADMIN_OR_SERVICE, "Show trait.", [("GET", "/traits/{name}")]),
    ("placement:traits:update", ADMIN_OR_SERVICE, "Update trait.", [("PUT", "/traits/{name}")]),
    ("placement:traits:delete", ADMIN_OR_SERVICE, "Delete trait.", [("DELETE", "/traits/{name}")]),
    (
        "placement:resource_providers:traits:list",
        ADMIN_OR_SERVICE,
        "List resource provider traits.",
        [("GET", RPU + "/traits")],
    ),
    (
        "placement:resource_providers:traits:update",
        ADMIN_OR_SERVICE,
        "Update resource provider traits.",
        [("PUT", RPU + "/traits")],
    ),
    (
        "placement:resource_providers:traits:delete",
        ADMIN_OR_SERVICE,
        "Delete resource provider traits.",
        [("DELETE", RPU + "/traits")],
    ),
    (
        "placement:allocations:manage",
        ADMIN_OR_SERVICE,
        "Manage allocations.",
        [("POST", "/allocations")],
    ),
    (
        "placement:allocations:list",
        ADMIN_OR_SERVICE,
        "List allocations.",
        [("GET", "/allocations/{consumer_uuid}")],
    ),
    (
        "placement:allocations:update",
        ADMIN_OR_SERVICE,
        "Update allocations.",
        [("PUT", "/allocations/{consumer_uuid}")],
    ),
    (
        "placement:allocations:delete",
        ADMIN_OR_SERVICE,
        "Delete allocations.",
        [("DELETE", "/allocations/{consumer_uuid}")],
    ),
    (
        "placement:resource_providers:allocations:list",
        ADMIN_OR_SERVICE,
        "List resource provider allocations.",
        [("GET", RPU + "/allocations")],
    ),
    (
        "placement:allocation_candidates:list",
        ADMIN_OR_SERVICE,
        "List allocation candidates.",
        [("GET", "/allocation_candidates")],
    ),
    (
        "placement:reshaper:reshape",
        SERVICE,
        "Reshape Inventory and Allocations.",
        [("POST", "/reshaper")],
    ),
    # Berth's own rules (not upstream's).
    (
        "berth:healthcheck:details",
        "rule:admin_api",
        "See the detailed health check (backend details, versions, thread "
        "stacks); other callers get the plain answer.",
        [("GET", "/healthcheck"), ("HEAD", "/healthcheck")],
    ),
    (
        "berth:metrics:show",
        "rule:admin_api",
        "Read the Prometheus metrics on the API port.",
        [("GET", "/metrics")],
    ),
    # Berth's own endpoints, admin only: they describe every provider.
    (
        "berth:explain",
        "rule:admin_api",
        "Explain why trees give no allocation candidate.",
        [("GET", "/berth/explain/allocation_candidates")],
    ),
    (
        "berth:fit",
        "rule:admin_api",
        "Count how many more copies of a request fit.",
        [("GET", "/berth/fit")],
    ),
    # The change feed: every provider's and consumer's changes, so as
    # /usages: admins and services, and a project's readers only their
    # own project's consumers (the handler narrows what they see).
    (
        "berth:changes:list",
        ADMIN_OR_PROJECT_READER_OR_SERVICE,
        "Read the change feed (a project reader: its own project's "
        "allocation events only, with project set to it).",
        [("GET", "/berth/changes"), ("GET", "/dashboard/changes")],
    ),
    (
        "berth:dashboard",
        "rule:admin_api",
        "Read the dashboard: every page under /dashboard (its live "
        "refresh's feed, /dashboard/changes, needs berth:changes:list).",
        [
            ("GET", "/dashboard"),
            ("GET", "/dashboard/providers"),
            ("GET", "/dashboard/consumers"),
            ("GET", "/dashboard/explain"),
            ("GET", "/dashboard/fit"),
            ("GET", "/dashboard/first"),
            ("GET", "/dashboard/seq"),
        ],
    ),
]


def rule_defaults(*, enforce_scope: bool = True) -> list[policy.RuleDefault]:
    """Every rule Berth registers, with upstream's names and defaults."""
    scope = ["project"] if enforce_scope else None
    rules: list[policy.RuleDefault] = []
    for name, check, desc in BASE_RULES:
        deprecated = None if name == "admin_api" else _DEPRECATED_ADMIN
        rules.append(
            policy.RuleDefault(
                name,
                check,
                description=desc,
                scope_types=None if name == "project_reader_api" else scope,
                deprecated_rule=deprecated,
            )
        )
    for name, check, desc, ops in API_RULES:
        rules.append(
            policy.DocumentedRuleDefault(
                name=name,
                check_str=check,
                description=desc,
                operations=[{"method": m, "path": p} for m, p in ops],
                scope_types=scope,
            )
        )
    return rules


def list_rules() -> list[policy.RuleDefault]:
    """Every rule and its default: oslo.policy's ``oslo.policy.policies``
    entry point (``oslopolicy-sample-generator --namespace placement``)."""
    return rule_defaults()


def get_enforcer() -> policy.Enforcer:
    """An enforcer set up as Berth's is, from the placement.conf that
    ``berth`` would read (``OS_PLACEMENT_CONFIG_DIR``, then oslo.config's
    search): oslo.policy's ``oslo.policy.enforcer`` entry point, for
    ``oslopolicy-policy-generator``, ``-list-redundant``, ``-checker``
    and ``-policy-upgrade``."""
    from berth import conf as berth_conf

    conf = berth_conf.load([])
    enforcer = policy.Enforcer(conf)
    enforcer.register_defaults(rule_defaults(enforce_scope=conf.oslo_policy.enforce_scope))
    return enforcer


#: How often (seconds) the policy file is checked for changes.
RELOAD_INTERVAL = 1.0


class Policy:
    """An oslo.policy enforcer loaded with Berth's rules.

    Decisions are cached per (rule, caller, target): oslo.policy re-checks
    the policy file and re-parses rules on every call, which cost more
    than the rest of a simple request. The cache is dropped whenever the
    policy file is reloaded (checked at most once per RELOAD_INTERVAL).
    """

    def __init__(self, conf: cfg.ConfigOpts) -> None:
        self.enforcer = policy.Enforcer(conf)
        self.enforcer.register_defaults(rule_defaults(enforce_scope=conf.oslo_policy.enforce_scope))
        self.enforcer.load_rules()
        self._cache: dict[tuple[object, ...], bool] = {}
        self._rules_id = id(self.enforcer.rules)
        self._checked = time.monotonic()

    def _refresh(self) -> None:
        now = time.monotonic()
        if now - self._checked < RELOAD_INTERVAL:
            return
        self._checked = now
        self.enforcer.load_rules()
        if id(self.enforcer.rules) != self._rules_id:
            self._rules_id = id(self.enforcer.rules)
            self._cache.clear()

    def authorize(
        self,
        ctx: oslo_context.RequestContext,
        action: str,
        target: dict[str, str | None] | None = None,
    ) -> None:
        """Raise :class:`Forbidden` unless ``ctx`` may do ``action``."""
        if target is None:
            target = {"project_id": ctx.project_id, "user_id": ctx.user_id}
        self._refresh()
        key = (
            action,
            tuple(sorted(ctx.roles)),
            ctx.user_id,
            ctx.project_id,
            ctx.system_scope,
            ctx.domain_id,
            tuple(sorted(target.items())),
        )
        allowed = self._cache.get(key)
        if allowed is None:
            try:
                self.enforcer.authorize(action, target, ctx, do_raise=True)
                allowed = True
            except (policy.PolicyNotAuthorized, policy.InvalidScope):
                allowed = False
            if len(self._cache) > 10000:
                self._cache.clear()
            self._cache[key] = allowed
        if not allowed:
            raise Forbidden("Policy does not allow %s to be performed." % action)
