#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: iam_roles
short_description: Several IAM roles with their policies, tags and instance profile, in one run
version_added: 0.1.0
description:
  - Creates each role of O(roles) when missing and converges, on every run, its trust policy, description,
    permissions boundary (when O(permissions_boundary) is given), managed policies (exactly the list given; others are
    detached), the named inline policies, its tags and, with O(roles[].instance_profile), an instance profile of the
    same name and path holding it.
  - A role the module creates carries the tag C(inferops:managed-by=inferops.triton_ecs.iam_roles). A role of the same
    name without it belongs to someone else and is not changed at all - the run fails before any write, naming the
    writes that taking it over would make - unless O(roles[].adopt) is set.
  - Refused before any call, each naming the statement and the fix - a trust policy that lets anyone in (a
    C(Principal) of C(*), C(NotPrincipal)) or any action (a wildcard C(Action), C(NotAction)); an admin-like AWS
    managed policy (C(AdministratorAccess*), C(PowerUserAccess), C(IAMFullAccess), C(job-function/SystemAdministrator));
    an inline policy allowing C(*), C(iam:*) or C(NotAction) on every resource.
  - Policy documents are compared as amazon.aws compares them (key order, a single value as a string or a list are
    no drift); a second run with the same input makes no write.
  - Inline policies not named in O(roles[].inline_policies) are left alone (another tool may own them); an instance
    profile is never deleted.
  - IAM cannot change the path of a role or an instance profile - a path that differs fails, naming the role and the
    fix, before any write. Every input is checked before the first AWS call.
  - Replaces M(amazon.aws.iam_role), M(amazon.aws.iam_policy) and M(amazon.aws.iam_instance_profile) runs for the
    fleet's roles; unlike M(amazon.aws.iam_role) it announces no deprecation.
author:
  - inferops maintainers (@inferops)
options:
  roles:
    description: The roles.
    type: list
    elements: dict
    required: true
    suboptions:
      name:
        description: Role name (also the instance profile's).
        type: str
        required: true
      trust_policy:
        description: The trust (assume role) policy document, a dict with a C(Statement).
        type: dict
        required: true
      description:
        description: Role description; omitted leaves it as it is.
        type: str
      managed_policies:
        description: ARNs of the managed policies attached to the role - exactly these; any other is detached.
        type: list
        elements: str
        default: []
      inline_policies:
        description: Inline policies, policy name -> policy document; each is put when missing or different.
        type: dict
        default: {}
      instance_profile:
        description: Also an instance profile of the role's name and O(path) holding the role (created when missing).
        type: bool
        default: false
      adopt:
        description:
          - Take over an existing role of this name that this collection did not create (no ownership tag) - its trust
            policy, managed policies, description, boundary and tags are converged, and it is tagged as the
            collection's. Without it such a role is left alone and the run fails, naming the writes adopting it
            would make.
          - Not needed for a role the module created; set it once, after reading what the refusal lists.
        type: bool
        default: false
  path:
    description: IAM path of every role and instance profile.
    type: str
    default: /
  permissions_boundary:
    description:
      - Permissions boundary (managed policy ARN) of every role.
      - Unset leaves each role's boundary as it is (a new role gets none), so a boundary someone else set stays;
        V("") removes it.
    type: str
attributes:
  diff_mode:
    details:
      - The diff shows, per role, the trust policy, description, permissions boundary, managed policies, the named
        inline policies and the tags.
extends_documentation_fragment:
  - inferops.triton_ecs.attributes.full
  - amazon.aws.tags
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: Task role and instance role with their policies, and the instance profile
  inferops.triton_ecs.iam_roles:
    roles:
      - name: triton-task
        description: Reads the model repository
        trust_policy: "{{ lookup('ansible.builtin.template', 'trust.json.j2') | from_json }}"
        inline_policies:
          triton-model-read: "{{ lookup('ansible.builtin.template', 'task_policy.json.j2') | from_json }}"
      - name: triton-ecs-instance
        trust_policy:
          Version: "2012-10-17"
          Statement:
            - Effect: Allow
              Principal: {Service: ec2.amazonaws.com}
              Action: sts:AssumeRole
        managed_policies:
          - arn:aws:iam::aws:policy/service-role/AmazonEC2ContainerServiceforEC2Role
        instance_profile: true
    tags:
      team: inference
    purge_tags: false
"""

RETURN = r"""
roles:
  description: Each role, in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: The role's name.
      type: str
    arn:
      description: The role's ARN; V(null) in check mode for a role still to create.
      type: str
    actions:
      description: >-
        The writes made (in check mode, that would be made) to this role - V(create_role), V(update_trust_policy),
        V(update_description), V(put_permissions_boundary), V(delete_permissions_boundary), V(attach_policy <arn>),
        V(detach_policy <arn>), V(put_inline_policy <name>), V(tag_role <keys>), V(untag_role <keys>),
        V(create_instance_profile <name>), V(add_role_to_instance_profile <name>).
      type: list
      elements: str
  sample:
    - {name: triton-task, arn: "arn:aws:iam::123456789012:role/triton-task", actions: []}
instance_profiles:
  description: The instance profiles of the roles with O(roles[].instance_profile) (in check mode, also those to create).
  returned: always
  type: list
  elements: str
  sample: [triton-ecs-instance]
actions:
  description: "Every write, C(<role>: <action>)."
  returned: always
  type: list
  elements: str
  sample: ["triton-task: put_inline_policy triton-model-read"]
"""

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, converge  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet.iam_roles import ensure  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._tags import TAGS_OPTIONS  # noqa: E402


def main() -> None:
    role_options = dict(
        name=dict(type="str", required=True),
        trust_policy=dict(type="dict", required=True),
        description=dict(type="str"),
        managed_policies=dict(type="list", elements="str", default=[]),
        inline_policies=dict(type="dict", default={}),
        instance_profile=dict(type="bool", default=False),
        adopt=dict(type="bool", default=False),
    )
    argument_spec = dict(
        roles=dict(type="list", elements="dict", required=True, options=role_options),
        path=dict(type="str", default="/"),
        permissions_boundary=dict(type="str"),
        **TAGS_OPTIONS,
    )
    module = aws_module(argument_spec)
    result = converge(module, ["iam"], ensure, "IAM roles: AWS call failed")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
