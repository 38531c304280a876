#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: preflight
short_description: Name every problem of an inventory at once, before anything is written
version_added: 0.1.0
description:
  - Reads the inventory's files (YAML and INI) and lists every value that still carries a placeholder marker (the
    example account C(111111111111), example ids and names, C(REPLACE_) values), each with its variable and file; a
    value the play sees that still carries one, from a source it cannot read (a script) or C(-e), is listed too.
  - Never prints a value whose variable (or key) is named like a secret (C(PASSWORD), C(TOKEN), C(SECRET), C(KEY),
    ...) - such values in O(values), O(settings) and O(agreements) are masked in all its output, its invocation
    included, at any verbosity and with any callback.
  - Refuses its own bad options before any check - a marker or setting pattern that is no regular expression, uses a
    back-reference or repeats an ambiguous part (as C((a+)+)); a setting without name or fix. Each pattern gets at
    most a second per value.
  - Checks the required settings it is given (missing or malformed), each reported with its fix, and that the
    settings which must hold one value (O(agreements), e.g. every name of the model host path) do.
  - Reads the caller identity (STS C(GetCallerIdentity)) and refuses credentials of another account than
    O(account_id), naming both ids, the region and how to switch profile.
  - With O(simulate_iam), asks IAM's policy simulator whether the caller may call each of O(iam_actions), and lists
    the ones it may not.
  - With O(security_group_rules), reads the fleet's security groups (one C(DescribeSecurityGroups) call) and checks
    the rules of its paths - load balancer to the tasks on Triton's HTTP port, container instances (the model agent)
    to the tasks on the HTTP and metrics ports, each as ingress and egress - as the security_group_rules module
    does. A group that does not exist is a problem; a missing rule is one unless the collection adds the rules
    (O(security_group_rules.manage)), named with the command that adds it and the switch that lets the collection
    add it. Skipped while a group id is a placeholder or the credentials are another account's.
  - Fails once, with all the problems found, so one run shows everything to fix. Only reads; never writes.
author:
  - inferops maintainers (@inferops)
options:
  inventory_sources:
    description: The inventory sources (files or directories) whose files are searched for placeholders, usually
      C(ansible_inventory_sources); their C(group_vars/) and C(host_vars/) are searched too.
    type: list
    elements: path
    default: []
  base_dir:
    description: Files below this directory are named relative to it (the directory ansible-playbook ran in).
    type: path
  values:
    description: The values the play sees for the inventory's variables (name to value). A placeholder overridden
      elsewhere (C(-e), a later file) is then not reported.
    type: dict
  markers:
    description: Regular expression to what it stands for; a value matching one is a placeholder. Empty uses the
      markers of C(inventories/example).
    type: dict
    default: {}
  settings:
    description: Required settings to check, each C({name, value, fix}) with an optional C(pattern) (matched
      against the value, or each item of a list) and C(applies) (V(false) skips it).
    type: list
    elements: dict
    default: []
  agreements:
    description: Groups of settings that must hold one value, each C({what, values, fix}); C(values) maps a
      setting's name (or where the value comes from) to its value, and unset ones (null, empty) are left out. A group
      with two different values is one problem naming every value and the fix.
    type: list
    elements: dict
    default: []
  account_id:
    description:
      - The account the inventory deploys to (C(aws_account_id)); the caller's account must equal it.
      - Empty or not 12 digits is a problem (the account check could not run).
    type: str
    required: true
  simulate_iam:
    description: Also check the caller's permissions for O(iam_actions) with IAM's policy simulator.
    type: bool
    default: false
  iam_actions:
    description: Actions to simulate, besides those of O(iam_policy_doc).
    type: list
    elements: str
    default: []
  status_write:
    description:
      - With O(simulate_iam), also asks the policy simulator whether the fleet's instance role may write a model agent's
        status object (C(s3:PutObject) on C(<prefix>/status/<application>/<instance-id>.json)) in a request carrying the
        context key C(ec2:SourceInstanceARN), as AWS sets it on requests signed with an instance's role credentials
        (docs/iam.md, "The status write"). A denied write is a problem, since no release would ever converge.
    type: dict
    suboptions:
      role_name:
        description: The instance role's name (C(fleet_iam_instance_role_name)).
        type: str
        required: true
      role_path:
        description: The instance role's path (C(fleet_iam_path)).
        type: str
        default: /
      bucket:
        description: The model bucket (C(fleet_iam_model_bucket)).
        type: str
        required: true
      prefix:
        description: The model prefix (C(fleet_iam_model_prefix)).
        type: str
        default: ""
      application:
        description: The application (C(fleet_iam_application)).
        type: str
        required: true
  iam_policy_doc:
    description: A Markdown file whose JSON policies under the heading O(iam_policy_section) name the actions to
      simulate (the collection's docs/iam.md).
    type: path
  iam_policy_section:
    description: The heading of O(iam_policy_doc) whose policies apply, e.g. V(deploy.yml).
    type: str
    default: deploy.yml
  security_group_rules:
    description: The fleet's network to check; omit it to skip the check.
    type: dict
    suboptions:
      network:
        description: The groups (and subnets) of C(load_balancer), C(instances) and C(tasks), each
          C({security_groups, subnets}), and C(http_port), C(metrics_port); as the security_group_rules module's
          O(inferops.triton_ecs.security_group_rules#module:network).
        type: dict
        required: true
      manage:
        description: The collection adds the missing rules later in the play (role fleet_services), so they are no
          problem; only missing groups are.
        type: bool
        default: false
      names:
        description: The variable to name in a problem, for C(<side>.security_groups), C(<side>.subnets),
          C(http_port), C(metrics_port) and C(manage) (the switch that lets the collection add the rules).
        type: dict
        default: {}
      applies:
        description: V(false) skips the check (e.g. the local rehearsal creates its network after the preflight).
        type: bool
        default: true
  resources:
    description:
      - Ids the inventory names, each read (describe calls only) to check that it exists in the account and region
        before any write; a missing one is a problem naming its variable, its value and the fix.
      - Each C({variable, kind, id}) (C(id) a string, or a list read as C(<variable>[i])); C(kind) is one of V(vpc),
        V(subnet), V(security_group), V(load_balancer), V(certificate), V(image), V(topic), V(bucket),
        V(ecr_repository). An empty id is left out; ids that still carry a placeholder are reported as placeholders only.
    type: list
    elements: dict
    default: []
  instance_type_fit:
    description:
      - One task against one instance of the fleet's instance type (DescribeInstanceTypes) - GPUs, CPU units and the
        memory ECS reserves (each container's memoryReservation, else its memory; the GPU's memory does not count).
      - C({instance_type, variable, gpus, cpu, memory, memory_variable, sidecar_memory}); omit it, or leave
        C(instance_type) empty, to skip the check.
      - With role C(fleet_capacity)'s capacity settings also (C(instance_types), C(capacity_reservation_id),
        C(capacity_reservation_group_arn), C(capacity_block_id), C(spot), C(max_size), C(subnets)), every type must hold one task
        (the smallest decides), the types must be of one GPU shape, the combination must be one that works, and a
        targeted reservation or Capacity Block (C(DescribeCapacityReservations)) must be live, hold the type and at
        least C(max_size) instances - instances that target it launch nowhere else - in the Availability Zone of one of
        C(subnets).
    type: dict
  principal_arn:
    description: The principal to simulate; default the caller (an assumed role's session becomes its role, which
      must then have no path).
    type: str
extends_documentation_fragment:
  - inferops.triton_ecs.attributes.info_module
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
notes:
  - moto does not implement C(SimulatePrincipalPolicy), so O(simulate_iam) is exercised against real AWS only.
  - The simulator evaluates each action on resource C(*); an action allowed only on named resources is listed as
    missing, so read the list against docs/iam.md.
"""

EXAMPLES = r"""
- name: Preflight (placeholders, required settings, account)
  inferops.triton_ecs.preflight:
    inventory_sources: "{{ ansible_inventory_sources }}"
    account_id: "{{ aws_account_id }}"
    region: "{{ aws_region }}"
    settings:
      - name: aws_region
        value: "{{ aws_region | default(none) }}"
        pattern: '^[a-z]{2}(-[a-z]+)+-[0-9]+$'
        fix: the region to deploy to, e.g. eu-west-1
    agreements:
      - what: the model host path
        values:
          fleet_capacity_model_host_path: "{{ fleet_capacity_model_host_path }}"
          task_definition_triton.model_repository_host_path: "{{ task_definition_triton.model_repository_host_path | default(none) }}"
        fix: drop task_definition_triton.model_repository_host_path (deploy.yml mounts the AMI's)
"""

RETURN = r"""
placeholders:
  description: Every placeholder left, with its variable, file, value and what its marker stands for.
  returned: always
  type: list
  elements: dict
problems:
  description: Every problem found, one sentence each (placeholders, settings, account, permissions).
  returned: always
  type: list
  elements: str
caller:
  description: The caller identity (C(Account), C(Arn), C(UserId)); empty when it could not be read.
  returned: always
  type: dict
account_id:
  description: The account the inventory deploys to.
  returned: always
  type: str
region:
  description: The region the play works in.
  returned: always
  type: str
missing_permissions:
  description: The actions the simulator denies (with O(simulate_iam)).
  returned: always
  type: list
  elements: str
status_write_allowed:
  description: Whether the simulator allows the instance role's status write with C(ec2:SourceInstanceARN) (O(status_write)).
  returned: with O(simulate_iam) and O(status_write)
  type: bool
resources_checked:
  description: The C(variable=id) of every resource read (with O(resources)); empty when they were not read.
  returned: always
  type: list
  elements: str
security_group_rules:
  description: The network check (with O(security_group_rules)) - whether the groups were read, and the rules
    they lack, each as the security_group_rules module returns it (with C(fix)).
  returned: always
  type: dict
  contains:
    checked:
      description: Whether the groups were read.
      type: bool
    missing:
      description: The rules of the fleet's paths the groups lack.
      type: list
      elements: dict
"""

import copy  # noqa: E402
from pathlib import Path  # noqa: E402

try:
    import boto3
except ImportError:  # pragma: no cover - AnsibleAWSModule reports the missing library
    boto3 = None
try:
    import yaml
except ImportError:  # pragma: no cover - main() reports the missing library
    yaml = None

from ansible.module_utils.basic import missing_required_lib  # noqa: E402

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import module_errors  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, client  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import preflight as _preflight  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import preflight_inputs as _preflight_inputs  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import preflight_network as _preflight_network  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import preflight_resources as _preflight_resources  # noqa: E402


def _documents(sources: list[str], base_dir: str | None) -> list[tuple[str, object]]:
    class _InventoryLoader(yaml.SafeLoader):
        """Reads Ansible's YAML: tagged values (!vault, !unsafe) are opaque, never placeholders."""

    _InventoryLoader.add_multi_constructor("!", lambda loader, suffix, node: None)
    documents = []
    for path in _preflight.inventory_files(sources):
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError):
            continue  # unreadable or binary: its values still reach the check through `values`
        try:
            document = yaml.load(text, Loader=_InventoryLoader)
        except yaml.YAMLError:
            document = None
        if not isinstance(document, dict):  # an INI inventory (YAML reads some as a string, or fails on them)
            document = _preflight_inputs.parse_ini_inventory(text)
        if document is not None:  # neither (a script): its values reach the check through `values`
            documents.append((_preflight.shown_path(path, base_dir), document))
    return documents


def _security_group_rules(module, params: dict, result: dict) -> dict:
    """The network check, once the credentials are known to be the inventory's account and no group id is a
    placeholder (those are reported already); its problems go with the others."""
    spec = params.get("security_group_rules") or {}
    network = spec.get("network") or {}
    groups = [g for side in ("load_balancer", "instances", "tasks") for g in (network.get(side) or {}).get("security_groups") or []]
    markers = params["markers"] or _preflight.DEFAULT_MARKERS
    if (
        not spec.get("applies", True)
        or not params["account_id"]
        or result["caller"].get("Account") != params["account_id"]
        or any(_preflight.marker_in(group, markers) for group in groups)
    ):
        return {"checked": False, "missing": []}
    report = _preflight_network.preflight_report(client(module, "ec2"), spec)
    result["problems"] += report["problems"]
    return {"checked": True, "missing": report["missing"]}


def _resources(module, params: dict, result: dict) -> list[str]:
    """The existence and instance-type reads, once the credentials are the inventory's account; ids that carry a
    placeholder are reported already and not read."""
    markers = params["markers"] or _preflight.DEFAULT_MARKERS
    if not params["account_id"] or result["caller"].get("Account") != params["account_id"]:
        return []
    resources = [r for r in _preflight_resources.expand(params["resources"]) if not _preflight.marker_in(str(r["id"]), markers)]
    fit = params.get("instance_type_fit")
    # An instance type or reservation id still a placeholder is reported as one, not read.
    named = ("instance_type", "instance_types", "capacity_reservation_id", "capacity_reservation_group_arn", "capacity_block_id")
    if fit and any(_preflight.marker_in(str(fit.get(key) or ""), markers) for key in named):
        fit = None
    report = _preflight_resources.preflight_report(
        lambda service: client(module, service), resources, fit, params["account_id"], params["region"]
    )
    result["problems"] += report["problems"]
    return report["checked"]


def main() -> None:
    argument_spec = dict(
        inventory_sources=dict(type="list", elements="path", default=[]),
        base_dir=dict(type="path"),
        values=dict(type="dict"),
        markers=dict(type="dict", default={}),
        settings=dict(type="list", elements="dict", default=[]),
        agreements=dict(type="list", elements="dict", default=[]),
        account_id=dict(type="str", required=True),
        simulate_iam=dict(type="bool", default=False),
        iam_actions=dict(type="list", elements="str", default=[]),
        iam_policy_doc=dict(type="path"),
        iam_policy_section=dict(type="str", default="deploy.yml"),
        principal_arn=dict(type="str"),
        status_write=dict(
            type="dict",
            options=dict(
                role_name=dict(type="str", required=True),
                role_path=dict(type="str", default="/"),
                bucket=dict(type="str", required=True),
                prefix=dict(type="str", default=""),
                application=dict(type="str", required=True),
            ),
        ),
        resources=dict(type="list", elements="dict", default=[]),
        instance_type_fit=dict(type="dict"),
        security_group_rules=dict(
            type="dict",
            options=dict(
                network=dict(type="dict", required=True),
                manage=dict(type="bool", default=False),
                names=dict(type="dict", default={}),
                applies=dict(type="bool", default=True),
            ),
        ),
    )
    module = aws_module(argument_spec)
    # Values under secret-looking names (a registry password, a token) never reach the output: masked wherever they
    # appear, and replaced in the invocation (a value too short to mask included). The checks use the real ones.
    module.no_log_values.update(_preflight_inputs.secret_values(module.params))
    params = dict(copy.deepcopy(module.params), region=module.region or "")
    module.params.update(_preflight_inputs.redacted(module.params))
    if yaml is None:
        module.fail_json(msg=missing_required_lib("PyYAML"))
    if params["simulate_iam"] and params["iam_policy_doc"]:
        unreadable = {
            OSError: lambda e: {"msg": f"iam_policy_doc {params['iam_policy_doc']}: cannot read it ({e}); give the path of docs/iam.md"}
        }
        with module_errors(module, reports=unreadable):
            policy_doc = Path(params["iam_policy_doc"]).read_text()
        params["iam_actions"] = sorted(
            set(params["iam_actions"]) | set(_preflight.policy_actions(policy_doc, params["iam_policy_section"]))
        )
    profile = params.get("profile")
    sts = iam = None
    if profile and profile not in boto3.session.Session().available_profiles:
        params["credentials_problem"] = (
            f"aws_profile {profile!r} is not a profile of this machine (~/.aws/config): create it "
            f"(aws configure sso --profile {profile}), or set aws_profile to one you have"
        )
    else:
        sts = client(module, "sts")
        if params["simulate_iam"]:
            iam = client(module, "iam")
    result = _preflight.run(params, _documents(params["inventory_sources"], params["base_dir"]), sts, iam)
    result["security_group_rules"] = _security_group_rules(module, params, result)
    result["resources_checked"] = _resources(module, params, result)
    if result["problems"]:
        count = len(result["problems"])
        # The message counts them and `problems` lists them: each problem is printed once, under the message.
        module.fail_json(
            msg=f"preflight: {count} problem{'s' if count > 1 else ''} to fix before anything is written (listed under problems)",
            **result,
        )
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()
