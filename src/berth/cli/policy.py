"""``berth policy list``: every policy rule and its default."""

from __future__ import annotations

import argparse

from berth.cli import common


def register(sub: common.Subparsers) -> None:
    group = common.add_group(sub, "policy", "policy rules")
    common.add_command(group, "list", "print every rule and its default", cmd_policy_list)


def cmd_policy_list(args: argparse.Namespace) -> int:
    from berth import policy

    conf = common.load_conf(args)
    for rule in policy.rule_defaults(enforce_scope=conf.oslo_policy.enforce_scope):
        print('"%s": "%s"' % (rule.name, rule.check_str))
        if rule.description:
            print("    # %s" % rule.description.strip().splitlines()[0])
    return 0
