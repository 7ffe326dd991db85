"""``berth status upgrade check``: is this deployment ready to upgrade?

Like ``placement-status upgrade check``: each check answers Success,
Warning or Failure with details, printed as a table; the exit code is the
worst result (0 all success, 1 a warning, 2 a failure).

Checks: database migrations not yet applied; incomplete consumers (whose
project or user is the ``[placement] incomplete_consumer_*`` placeholder);
providers without a root; and the policy file: rules Berth does not know,
rules that do not parse, references to undefined rules, and a JSON file
(deprecated upstream in favour of YAML); and Keystone authentication that
``berth serve`` would refuse (``berth.conf.check.check_auth``).
"""

from __future__ import annotations

import argparse
import enum
import json
import logging
import re
import textwrap
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
import yaml
from oslo_config import cfg

from berth.cli import common
from berth.db import tables as t

__all__ = ["Code", "CheckResult", "CHECKS", "run_checks", "render", "report", "cmd_upgrade_check"]


class Code(enum.IntEnum):
    SUCCESS = 0
    WARNING = 1
    FAILURE = 2


@dataclass(frozen=True)
class CheckResult:
    code: Code
    details: str | None = None


Check = Callable[[cfg.ConfigOpts, sa.engine.Engine], CheckResult]


def check_migrations(conf: cfg.ConfigOpts, engine: sa.engine.Engine) -> CheckResult:
    from berth.db import migrate, setup

    if setup.missing(engine.url):  # this check creates no database
        return CheckResult(
            Code.FAILURE,
            "There is no database at %s. Run 'berth db sync' to create it." % _named(engine),
        )
    current, head = migrate.current_revision(engine), migrate.head_revision()
    if current == head:
        return CheckResult(
            Code.SUCCESS, "The database %s is at migration %s, the newest." % (_named(engine), head)
        )
    return CheckResult(
        Code.FAILURE,
        "The database %s is at migration %s but "
        "this release needs %s. Run 'berth db sync'."
        % (_named(engine), current or "none (empty)", head),
    )


def _named(engine: sa.engine.Engine) -> str:
    """The database's URL, its password hidden."""
    from berth.db import urls

    return urls.masked(engine.url)


def check_incomplete_consumers(conf: cfg.ConfigOpts, engine: sa.engine.Engine) -> CheckResult:
    c, p, u = t.consumers, t.projects, t.users
    query = (
        sa.select(sa.func.count())
        .select_from(c.join(p, c.c.project_id == p.c.id).join(u, c.c.user_id == u.c.id))
        .where(
            sa.or_(
                p.c.external_id == conf.placement.incomplete_consumer_project_id,
                u.c.external_id == conf.placement.incomplete_consumer_user_id,
            )
        )
    )
    with engine.connect() as conn:
        count = conn.execute(query).scalar_one()
    if not count:
        return CheckResult(Code.SUCCESS)
    return CheckResult(
        Code.WARNING,
        "There are %d incomplete consumers (written "
        "before microversion 1.8, without a real project and "
        "user). Rewrite their allocations with the real project "
        "and user (PUT /allocations/{consumer}) before a release "
        "that drops the placeholder." % count,
    )


def check_root_providers(conf: cfg.ConfigOpts, engine: sa.engine.Engine) -> CheckResult:
    rp = t.resource_providers
    with engine.connect() as conn:
        count = conn.execute(
            sa.select(sa.func.count()).select_from(rp).where(rp.c.root_provider_id.is_(None))
        ).scalar_one()
    if not count:
        return CheckResult(Code.SUCCESS)
    return CheckResult(
        Code.FAILURE,
        "There are %d resource providers without a "
        "root provider. Set root_provider_id (the provider's own "
        "id for a root) before upgrading." % count,
    )


def _load_policy(path: str) -> tuple[dict[str, Any], bool]:
    """The rules in ``path`` and whether the file is JSON."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    try:
        return dict(json.loads(text) or {}), True
    except ValueError:
        return dict(yaml.safe_load(text) or {}), False


def _unparsable(check: str) -> bool:
    from oslo_policy import _checks, _parser

    logger = logging.getLogger("oslo_policy._parser")
    level, logger.level = logger.level, logging.CRITICAL + 1
    try:
        parsed = _parser.parse_rule(check)
    finally:
        logger.level = level
    # The parser answers "never" (FalseCheck) for text it cannot read;
    # "!" asks for exactly that on purpose.
    return isinstance(parsed, _checks.FalseCheck) and check.strip() != "!"


def check_policy(conf: cfg.ConfigOpts, engine: sa.engine.Engine) -> CheckResult:
    from berth import policy

    path = conf.find_file(conf.oslo_policy.policy_file)
    if path is None:
        return CheckResult(Code.SUCCESS)
    try:
        rules, is_json = _load_policy(path)
    except (OSError, ValueError, yaml.YAMLError) as exc:
        return CheckResult(
            Code.FAILURE, "Policy file %s cannot be read: %s" % (path, str(exc).splitlines()[0])
        )
    known = {r.name for r in policy.rule_defaults()}
    defined = known | set(rules)
    bad = sorted(n for n, c in rules.items() if not isinstance(c, str) or _unparsable(c))
    if bad:
        return CheckResult(
            Code.FAILURE, "Policy file %s has rules that do not parse: %s" % (path, ", ".join(bad))
        )
    problems = []
    unknown = sorted(set(rules) - known)
    if unknown:
        problems.append("unknown rule names (ignored): %s" % ", ".join(unknown))
    dangling = sorted(
        {
            ref
            for c in rules.values()
            for ref in re.findall(r"rule:([\w:.-]+)", c)
            if ref not in defined
        }
    )
    if dangling:
        problems.append("references to undefined rules: %s" % ", ".join(dangling))
    if is_json:
        problems.append("the file is JSON; convert it to YAML (oslopolicy-convert-json-to-yaml)")
    if problems:
        return CheckResult(Code.WARNING, "Policy file %s: %s." % (path, "; ".join(problems)))
    return CheckResult(Code.SUCCESS)


def check_keystone(conf: cfg.ConfigOpts, engine: sa.engine.Engine) -> CheckResult:
    """Failure for what ``berth serve`` and ``berth.wsgi`` refuse to start
    with: ``auth_strategy = keystone`` without a usable
    ``[keystone_authtoken]``."""
    from berth import conf as berth_conf
    from berth.conf import check

    if berth_conf.is_embedded(conf):  # berth serve: noauth2 on loopback
        return CheckResult(Code.SUCCESS)
    try:
        check.check_auth(conf)
    except check.ConfigProblem as exc:
        return CheckResult(Code.FAILURE, str(exc))
    return CheckResult(Code.SUCCESS)


CHECKS: list[tuple[str, Check]] = [
    ("Database Migrations", check_migrations),
    ("Incomplete Consumers", check_incomplete_consumers),
    ("Missing Root Provider IDs", check_root_providers),
    ("Policy File", check_policy),
    ("Keystone Authentication", check_keystone),
]


def _skipped(engine: sa.engine.Engine) -> CheckResult:
    """What a data check reports when the schema is not current: nothing
    to check in an empty database (Success), unknown in an old one
    (Warning: run the check again after ``berth db sync``)."""
    from berth.db import migrate, setup

    if setup.missing(engine.url):
        return CheckResult(
            Code.SUCCESS, "Skipped: there is no database, so there is nothing to check."
        )
    if migrate.current_revision(engine) is None:
        return CheckResult(
            Code.SUCCESS, "Skipped: the database is empty, so there is nothing to check."
        )
    return CheckResult(
        Code.WARNING,
        "Skipped: the database schema is not current. Run 'berth db sync', then this check again.",
    )


def run_checks(conf: cfg.ConfigOpts, engine: sa.engine.Engine) -> list[tuple[str, CheckResult]]:
    """Every check's result. Data checks are skipped when the schema is
    not in place, since they would only fail obscurely; a skipped check
    is not a failure (see ``_skipped``). Nothing creates a database: a
    missing SQLite file fails the migrations check, naming it."""
    from berth.db import setup

    results: list[tuple[str, CheckResult]] = []
    skipped: CheckResult | None = None
    for name, check in CHECKS:
        if skipped is not None and check in (check_incomplete_consumers, check_root_providers):
            results.append((name, skipped))
            continue
        try:
            result = check(conf, engine)
            if check is check_migrations and result.code != Code.SUCCESS:
                skipped = _skipped(engine)
        except sa.exc.SQLAlchemyError as exc:
            result = CheckResult(
                Code.FAILURE, "Database error at %s: %s" % (_named(engine), setup.first_line(exc))
            )
        results.append((name, result))
    return results


def render(results: list[tuple[str, CheckResult]], width: int = 60) -> str:
    """The results as the boxed table ``placement-status`` prints."""
    rows: list[list[str]] = [["Upgrade Check Results"]]
    for name, result in results:
        rows.append(
            ["Check: %s" % name, "Result: %s" % result.code.name.capitalize()]
            # A URL or path stays whole, to be copied.
            + textwrap.wrap(
                "Details: %s" % result.details,
                width,
                break_long_words=False,
                break_on_hyphens=False,
            )
            if result.details
            else ["Check: %s" % name, "Result: %s" % result.code.name.capitalize(), "Details: None"]
        )
    inner = max(len(line) for block in rows for line in block)
    rule = "+" + "-" * (inner + 2) + "+"
    out = [rule]
    for block in rows:
        out += ["| %s |" % line.ljust(inner) for line in block]
        out.append(rule)
    return "\n".join(out)


def report(conf: cfg.ConfigOpts, *, as_json: bool = False) -> int:
    """Run every check, print the table (or oslo.upgradecheck's JSON
    document) and return the exit code: the worst result."""
    from berth.db import setup

    try:
        engine = setup.engine_to_read(conf)
    except setup.NoDatabase as exc:
        # Never connected: the checks see the file is missing and say so.
        engine = sa.create_engine(exc.url)
    try:
        results = run_checks(conf, engine)
    finally:
        engine.dispose()
    if as_json:
        print(
            json.dumps(
                {
                    "name": "Upgrade Check Results",
                    "checks": [
                        {"check": name, "result": int(r.code), "details": r.details}
                        for name, r in results
                    ],
                }
            )
        )
    else:
        print(render(results))
    return int(max((r.code for _, r in results), default=Code.SUCCESS))


def register(sub: common.Subparsers) -> None:
    group = common.add_group(sub, "status", "operator checks")
    upgrade = common.add_group(group, "upgrade", "upgrade readiness")
    check = common.add_command(
        upgrade,
        "check",
        "report migrations, incomplete consumers, orphans and policy problems; exit 0, 1 or 2",
        cmd_upgrade_check,
    )
    check.add_argument(
        "--json", action="store_true", help="print the results as JSON, as oslo.upgradecheck does"
    )


def cmd_upgrade_check(args: argparse.Namespace) -> int:
    return report(common.load_conf(args), as_json=bool(getattr(args, "json", False)))
