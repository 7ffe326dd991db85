"""oslo's own tools know Berth as they know upstream Placement: the
``oslo.config.opts``, ``oslo.config.opts.defaults``, ``oslo.policy.enforcer``
and ``oslo.policy.policies`` entry points named ``placement``
(pyproject.toml; berth.conf.opts, berth.policy). Each tool is run as an
operator runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BIN = Path(sys.executable).parent


def tool(
    name: str, *args: str, env: dict[str, str] | None = None, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / name), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=cwd,
        env={**os.environ, **(env or {})},
    )


def test_the_config_generator_writes_every_option_berth_reads() -> None:
    result = tool("oslo-config-generator", "--namespace", "placement")
    assert result.returncode == 0, result.stderr
    sample = result.stdout
    for section in (
        "[DEFAULT]",
        "[api]",
        "[placement_database]",
        "[placement]",
        "[berth]",
        "[oslo_policy]",
        "[cors]",
        "[healthcheck]",
        "[keystone_authtoken]",
    ):
        assert section in sample
    assert "#connection = <None>" in sample
    assert "#strict_config = false" in sample
    assert "#auth_strategy = keystone" in sample
    assert "#backends = berth_database" in sample  # Berth's default, set
    assert "#username = <None>" in sample  # the password plugin's options


def test_upstreams_namespace_name_lists_berths_own_groups() -> None:
    result = tool("oslo-config-generator", "--namespace", "placement.conf")
    assert result.returncode == 0, result.stderr
    assert "[placement_database]" in result.stdout
    assert "[keystone_authtoken]" not in result.stdout


def test_the_validator_flags_the_misspelled_section(tmp_path: Path) -> None:
    good = tmp_path / "good.conf"
    good.write_text(
        "[DEFAULT]\ndebug = true\n[api]\nauth_strategy = keystone\n"
        "[placement_database]\nconnection = mysql+pymysql://p@db/p\n"
        "[keystone_authtoken]\nauth_type = password\n"
        "auth_url = http://keystone/\nusername = placement\n"
        "password = x\nproject_name = service\n"
        "memcached_servers = 127.0.0.1:11211\n"
    )
    result = tool("oslo-config-validator", "--namespace", "placement", "--input-file", str(good))
    assert result.returncode == 0, result.stderr
    bad = tmp_path / "bad.conf"
    bad.write_text(good.read_text().replace("[placement_database]", "[placement_databse]"))
    result = tool("oslo-config-validator", "--namespace", "placement", "--input-file", str(bad))
    assert result.returncode != 0
    assert "placement_databse/connection is not part of the sample config" in result.stderr


def test_the_policy_sample_lists_every_rule() -> None:
    from berth import policy

    result = tool("oslopolicy-sample-generator", "--namespace", "placement")
    assert result.returncode == 0, result.stderr
    for rule in policy.rule_defaults():
        assert '#"%s": "%s"' % (rule.name, rule.check_str) in result.stdout


def test_list_redundant_finds_the_rule_that_repeats_its_default(
    policy_conf: dict[str, str],
) -> None:
    result = tool("oslopolicy-list-redundant", "--namespace", "placement", env=policy_conf)
    assert result.returncode == 0, result.stderr
    redundant = result.stdout.strip().splitlines()
    assert any("placement:resource_providers:list" in line for line in redundant)
    assert not any("placement:usages" in line for line in redundant)


def test_the_merged_policy_generator_applies_the_file(policy_conf: dict[str, str]) -> None:
    result = tool("oslopolicy-policy-generator", "--namespace", "placement", env=policy_conf)
    assert result.returncode == 0, result.stderr
    assert '"placement:usages": "role:admin"' in result.stdout


def test_policy_upgrade_runs(tmp_path: Path) -> None:
    old = tmp_path / "policy.yaml"
    old.write_text('"placement:usages": "role:admin"\n')
    out = tmp_path / "new.yaml"
    result = tool(
        "oslopolicy-policy-upgrade",
        "--namespace",
        "placement",
        "--policy",
        str(old),
        "--output-file",
        str(out),
    )
    assert result.returncode == 0, result.stderr
    assert "placement:usages" in out.read_text()


def test_the_checker_answers_for_a_token(tmp_path: Path) -> None:
    policy_file = tmp_path / "policy.yaml"
    policy_file.write_text('"placement:usages": "role:admin"\n')
    access = tmp_path / "access.json"
    access.write_text(
        '{"token": {"roles": [{"name": "reader"}], "project": {"id": "p"}, "user": {"id": "u"}}}'
    )
    result = tool(
        "oslopolicy-checker",
        "--policy",
        str(policy_file),
        "--access",
        str(access),
        "--rule",
        "placement:usages",
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "failed: placement:usages"
    access.write_text(access.read_text().replace("reader", "admin"))
    result = tool(
        "oslopolicy-checker",
        "--policy",
        str(policy_file),
        "--access",
        str(access),
        "--rule",
        "placement:usages",
    )
    assert result.stdout.strip() == "passed: placement:usages"
