# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""IAM roles converged in one module run: each role with its trust policy, description, permissions boundary,
managed policies (exactly the list), named inline policies, tags and, when asked, an instance profile holding it.

Policy documents are compared with amazon.aws's `compare_policies`, so key order, a single item written as a string
or as a list, and the like are no drift. Inline policies the module is not given are left alone: another tool may
own them. An instance profile is created and given its role, never deleted. IAM cannot change a role's or a
profile's path: a path that differs fails before any write.

A role the module creates carries the ownership tag (OWNER_TAG); a role of the same name without it belongs to
someone else and is changed only with `adopt` (which tags it). The permissions boundary is converged only when one
is given: the default leaves a boundary someone else set. Trust policies anyone could assume through, and admin-like
managed or inline policies, are refused before the first call (`grant_errors`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ansible_collections.amazon.aws.plugins.module_utils.policy import compare_policies
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import iam as _iam
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import InputError
from ansible_collections.inferops.triton_ecs.plugins.module_utils._tags import as_strings, key_errors
from ansible_collections.inferops.triton_ecs.plugins.module_utils._tags import plan as plan_tags

ROLE_NAME = re.compile(r"^[\w+=,.@-]{1,64}$")
_POLICY_NAME = re.compile(r"^[\w+=,.@-]{1,128}$")
_PATH = re.compile(r"^/([\x21-\x7e]*/)?$")
_POLICY_ARN = re.compile(r"^arn:aws[a-z-]*:iam::(aws|\d{12}):policy/")
_DESCRIPTION_MAX = 1000
# The tag that marks a role as this collection's: without it a role of the same name is someone else's.
OWNER_TAG = "inferops:managed-by"
OWNER_VALUE = "inferops.triton_ecs.iam_roles"
# AWS managed policies that grant (nearly) everything, or the power to grant it: no fleet role needs one.
_ADMIN_LIKE = re.compile(
    r"^arn:aws[a-z-]*:iam::aws:policy/(.*/)?(AdministratorAccess[\w-]*|PowerUserAccess|IAMFullAccess|SystemAdministrator)$"
)


@dataclass(frozen=True)
class Write:
    """One write to IAM: the action, what it names (a policy ARN, an inline policy name, tag keys) and its value."""

    action: str
    subject: str = ""
    value: Any = None

    def __str__(self) -> str:
        return f"{self.action} {self.subject}" if self.subject else self.action


# ---------------------------------------------------------------- pure


def _policy_error(field: str, document: Any) -> str | None:
    if not isinstance(document, dict) or not document.get("Statement"):
        return f"{field} is {document!r}: give a policy document (a dict with a Statement), e.g. from a template with | from_json"
    return None


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def _allow_statements(document: Any) -> list[tuple[int, dict[str, Any]]]:
    statements = document.get("Statement") if isinstance(document, dict) else None
    return [(i, st) for i, st in enumerate(_as_list(statements or [])) if isinstance(st, dict) and st.get("Effect") == "Allow"]


def _wildcard(value: Any) -> bool:
    return isinstance(value, str) and "*" in value


def trust_errors(field: str, document: Any) -> list[str]:
    """A trust policy that lets anyone, or any action, in: Principal "*" (or an AWS "*"), NotPrincipal, Action with
    a wildcard, NotAction - in an Allow statement. Deny statements are guards and may say what they like."""
    errors = []
    for i, statement in _allow_statements(document):
        where = f"{field}.Statement[{i}]"
        principal = statement.get("Principal")
        values = [v for kind in (principal.values() if isinstance(principal, dict) else [principal]) for v in _as_list(kind)]
        if any(v == "*" for v in values):
            errors.append(
                f"{where}.Principal is {principal!r}: anyone could assume the role; name the principal, e.g. "
                '{"Service": "ecs-tasks.amazonaws.com"} or {"AWS": "arn:aws:iam::<account>:role/<name>"}'
            )
        if "NotPrincipal" in statement:
            errors.append(f"{where} allows with NotPrincipal (everyone but the ones named): name the principal under Principal instead")
        if "NotAction" in statement:
            errors.append(f"{where} allows with NotAction (every action but the ones named): list the actions, e.g. sts:AssumeRole")
        wild = [a for a in _as_list(statement.get("Action")) if _wildcard(a)]
        if wild:
            errors.append(f"{where}.Action {wild!r} is a wildcard: list the actions, e.g. sts:AssumeRole (and sts:TagSession)")
    return errors


def grant_errors(field: str, document: Any) -> list[str]:
    """An identity policy that grants like an administrator: an Allow of every action (or of every IAM action, the
    power to grant oneself the rest), or of everything but some (NotAction), on every resource."""
    errors = []
    for i, statement in _allow_statements(document):
        where = f"{field}.Statement[{i}]"
        actions = [str(a).lower() for a in _as_list(statement.get("Action"))]
        everywhere = "*" in _as_list(statement.get("Resource")) or "NotResource" in statement
        if "NotAction" in statement and everywhere:
            errors.append(f"{where} allows every action but {statement['NotAction']!r} on every resource: list the actions it needs")
        elif everywhere and any(a in ("*", "*:*", "iam:*") for a in actions):
            errors.append(
                f"{where} allows {statement.get('Action')!r} on every resource, as an administrator: list the actions and "
                "resources the role needs (docs/iam.md)"
            )
    return errors


def _role_errors(index: int, role: dict[str, Any]) -> list[str]:
    where = f"roles[{index}]"
    errors = []
    name = role.get("name") or ""
    if not isinstance(name, str) or not ROLE_NAME.match(name):
        errors.append(f"{where}.name {name!r}: a role name is 1-64 letters, digits and +=,.@_-, e.g. triton-task")
    error = _policy_error(f"{where}.trust_policy", role.get("trust_policy"))
    errors += [error] if error else trust_errors(f"{where}.trust_policy", role.get("trust_policy"))
    description = role.get("description")
    if description is not None and (not isinstance(description, str) or len(description) > _DESCRIPTION_MAX):
        errors.append(f"{where}.description {description!r}: a description is text of at most {_DESCRIPTION_MAX} characters")
    for arn in role.get("managed_policies") or []:
        if not isinstance(arn, str) or not _POLICY_ARN.match(arn):
            errors.append(
                f"{where}.managed_policies: {arn!r} is not a managed policy ARN; give arn:aws:iam::aws:policy/<name> or "
                "arn:aws:iam::<account>:policy/<name>"
            )
        elif _ADMIN_LIKE.match(arn):
            errors.append(
                f"{where}.managed_policies: {arn} grants (nearly) every action or the power to grant them: attach the "
                "policies the role needs instead (docs/iam.md)"
            )
    inline = role.get("inline_policies") or {}
    if not isinstance(inline, dict):
        return [*errors, f"{where}.inline_policies is {inline!r}: give a dict of policy name -> policy document"]
    for policy_name, document in inline.items():
        if not _POLICY_NAME.match(str(policy_name)):
            errors.append(f"{where}.inline_policies: name {policy_name!r}: a policy name is 1-128 letters, digits and +=,.@_-")
        error = _policy_error(f"{where}.inline_policies.{policy_name}", document)
        errors += [error] if error else grant_errors(f"{where}.inline_policies.{policy_name}", document)
    return errors


def validate(params: dict[str, Any]) -> list[str]:
    """Every problem of the input, each naming the field, the value and the fix; [] when the input is good."""
    errors = []
    roles = params.get("roles") or []
    if not roles:
        errors.append("roles is empty: give at least one role ({name, trust_policy, ...})")
    for index, role in enumerate(roles):
        errors += _role_errors(index, role)
    names = [role.get("name") for role in roles]
    for name in sorted({n for n in names if names.count(n) > 1}, key=str):
        errors.append(f"roles: {name!r} is given {names.count(name)} times; give each role once")
    path = params.get("path")
    if not isinstance(path, str) or not _PATH.match(path):
        errors.append(f"path {path!r}: an IAM path starts and ends with /, e.g. / or /triton/")
    boundary = params.get("permissions_boundary")
    if boundary and not _POLICY_ARN.match(boundary):
        errors.append(
            f"permissions_boundary {boundary!r}: give a managed policy ARN (arn:aws:iam::<account>:policy/<name>), "
            'leave it unset to keep the boundary a role has, or "" to remove it'
        )
    for key, value in (params.get("tags") or {}).items():
        if not isinstance(value, str):
            errors.append(f"tags.{key} is {value!r}: tag values are strings; quote it")
        if key == OWNER_TAG:
            errors.append(f"tags.{key}: the module sets this tag on the roles it owns; drop it from tags (adopt takes a role over)")
    return errors + key_errors(params.get("tags"))


def wanted_role(params: dict[str, Any], role: dict[str, Any]) -> dict[str, Any]:
    """One role of `roles` with the options that apply to every role."""
    return {
        "name": role["name"],
        "path": params.get("path") or "/",
        "trust_policy": role["trust_policy"],
        "description": role.get("description"),
        # None: leave the boundary as it is (a new role gets none); "" removes it; an ARN puts it.
        "permissions_boundary": params.get("permissions_boundary"),
        "managed_policies": list(role.get("managed_policies") or []),
        "inline_policies": dict(role.get("inline_policies") or {}),
        "instance_profile": bool(role.get("instance_profile")),
        "adopt": bool(role.get("adopt")),
        # The ownership tag always; without `tags` the role's other tags are left alone.
        "tags": {**(as_strings(params.get("tags")) or {}), OWNER_TAG: OWNER_VALUE},
        "purge_tags": params.get("purge_tags", True) and params.get("tags") is not None,
    }


def owned(role: dict[str, Any]) -> bool:
    """Whether a role (as IAM describes it) carries this collection's ownership tag."""
    return _iam.tags_of(role).get(OWNER_TAG) == OWNER_VALUE


def _boundary_of(role: dict[str, Any]) -> str:
    return (role.get("PermissionsBoundary") or {}).get("PermissionsBoundaryArn", "")


def _role_writes(role: dict[str, Any], wanted: dict[str, Any]) -> list[Write]:
    """The writes to an existing role's own fields: trust policy, description, boundary."""
    writes = []
    if compare_policies(role.get("AssumeRolePolicyDocument") or {}, wanted["trust_policy"]):
        writes.append(Write("update_trust_policy", value=wanted["trust_policy"]))
    if wanted["description"] is not None and role.get("Description", "") != wanted["description"]:
        writes.append(Write("update_description", value=wanted["description"]))
    if wanted["permissions_boundary"] is not None and _boundary_of(role) != wanted["permissions_boundary"]:
        if wanted["permissions_boundary"]:
            writes.append(Write("put_permissions_boundary", wanted["permissions_boundary"], wanted["permissions_boundary"]))
        else:
            writes.append(Write("delete_permissions_boundary", _boundary_of(role)))
    return writes


def _profile_writes(profile: dict[str, Any] | None, wanted: dict[str, Any]) -> list[Write]:
    name = wanted["name"]
    if profile is None:
        return [Write("create_instance_profile", name), Write("add_role_to_instance_profile", name)]
    if profile.get("Path", "/") != wanted["path"]:
        raise InputError(
            f"instance profile {name} has path {profile.get('Path')!r}, not {wanted['path']!r}, and IAM cannot move it: "
            f"delete the profile (it is created again) or set path to {profile.get('Path')!r}"
        )
    holders = [r["RoleName"] for r in profile.get("Roles") or []]
    if name in holders:
        return []
    if holders:
        raise InputError(
            f"instance profile {name} holds role {holders[0]} and a profile holds one role: remove that role from it "
            "(aws iam remove-role-from-instance-profile) or set instance_profile: false on this role"
        )
    return [Write("add_role_to_instance_profile", name)]


def plan(current: dict[str, Any], wanted: dict[str, Any]) -> list[Write]:
    """The writes that bring one role to `wanted`, in order. `current` is what `read_role` found.

    Raises InputError for what IAM cannot change in place (a role's or its profile's path), and for a role of that
    name that is someone else's (no ownership tag) unless `adopt` is set; no write is planned then.
    """
    role = current.get("role")
    name = wanted["name"]
    writes: list[Write] = []
    if role is None:
        writes.append(Write("create_role"))
    else:
        if not wanted["adopt"] and not owned(role):
            would = [str(w) for w in plan(current, {**wanted, "adopt": True}) if w.action != "tag_role" or w.subject != OWNER_TAG]
            raise InputError(
                f"role {name} exists and is not this collection's (no tag {OWNER_TAG}={OWNER_VALUE}): it may belong to "
                f"someone else, so it is left as it is. Taking it over would make these writes: {', '.join(would) or 'none but the tag'}. "
                f"Give roles[].adopt: true for {name} to take it over (role fleet_iam: fleet_iam_adopt_roles: true), "
                "or choose another role name"
            )
        if role.get("Path", "/") != wanted["path"]:
            raise InputError(
                f"role {name} has path {role.get('Path')!r}, not {wanted['path']!r}, and IAM cannot move a role: "
                f"delete the role (it is created again on the next run) or set path to {role.get('Path')!r}"
            )
        writes += _role_writes(role, wanted)
    attached = current.get("managed_policies") or []
    writes += [Write("attach_policy", arn) for arn in wanted["managed_policies"] if arn not in attached]
    writes += [Write("detach_policy", arn) for arn in attached if arn not in wanted["managed_policies"]]
    inline = current.get("inline_policies") or {}
    for policy_name, document in sorted(wanted["inline_policies"].items()):
        if inline.get(policy_name) is None or compare_policies(inline[policy_name], document):
            writes.append(Write("put_inline_policy", policy_name, document))
    if role is not None:  # a new role gets its tags at creation
        tags = plan_tags(_iam.tags_of(role), wanted["tags"], wanted["purge_tags"])
        if tags.to_set:
            writes.append(Write("tag_role", ",".join(tags.to_set), tags.to_set))
        if tags.to_remove:
            writes.append(Write("untag_role", ",".join(tags.to_remove), tags.to_remove))
    if wanted["instance_profile"]:
        writes += _profile_writes(current.get("instance_profile"), wanted)
    return writes


def summary(current: dict[str, Any]) -> dict[str, Any]:
    """What the diff shows of one role as `read_role` found it; {} for a role that does not exist."""
    role = current.get("role")
    if role is None:
        return {}
    return {
        "trust_policy": role.get("AssumeRolePolicyDocument"),
        "description": role.get("Description", ""),
        "permissions_boundary": _boundary_of(role),
        "managed_policies": sorted(current.get("managed_policies") or []),
        "inline_policies": {k: v for k, v in sorted((current.get("inline_policies") or {}).items()) if v is not None},
        "tags": _iam.tags_of(role),
    }


def summary_after(current: dict[str, Any], wanted: dict[str, Any]) -> dict[str, Any]:
    """What the diff shows of one role once converged."""
    before = summary(current)
    description = wanted["description"] if wanted["description"] is not None else before.get("description", "")
    inline = {**before.get("inline_policies", {}), **wanted["inline_policies"]}
    return {
        "trust_policy": wanted["trust_policy"],
        "description": description,
        "permissions_boundary": before.get("permissions_boundary", "")
        if wanted["permissions_boundary"] is None
        else wanted["permissions_boundary"],
        "managed_policies": sorted(wanted["managed_policies"]),
        "inline_policies": dict(sorted(inline.items())),
        "tags": plan_tags(before.get("tags", {}), wanted["tags"], wanted["purge_tags"]).after,
    }


# ---------------------------------------------------------------- the module's run


def read_role(iam: Any, wanted: dict[str, Any]) -> dict[str, Any]:
    """The role, its attached managed policies, the documents of the wanted inline policies and its instance profile."""
    role = _iam.get_role(iam, wanted["name"])
    current: dict[str, Any] = {"role": role, "managed_policies": [], "inline_policies": {}, "instance_profile": None}
    if role is not None:
        current["managed_policies"] = _iam.list_attached_policies(iam, wanted["name"])
        current["inline_policies"] = {p: _iam.get_inline_policy(iam, wanted["name"], p) for p in sorted(wanted["inline_policies"])}
    if wanted["instance_profile"]:
        current["instance_profile"] = _iam.get_instance_profile(iam, wanted["name"])
    return current


def apply(iam: Any, wanted: dict[str, Any], writes: list[Write]) -> str | None:
    """Makes the writes, in order; returns the ARN of a role it created."""
    name = wanted["name"]
    created = None
    for write in writes:
        if write.action == "create_role":
            wanted_tags = wanted["tags"] or {}
            role = _iam.create_role(
                iam, name, wanted["path"], wanted["trust_policy"], wanted["description"], wanted["permissions_boundary"] or "", wanted_tags
            )
            created = role["Arn"]
        elif write.action == "update_trust_policy":
            _iam.update_assume_role_policy(iam, name, write.value)
        elif write.action == "update_description":
            _iam.update_role_description(iam, name, write.value)
        elif write.action == "put_permissions_boundary":
            _iam.put_permissions_boundary(iam, name, write.value)
        elif write.action == "delete_permissions_boundary":
            _iam.delete_permissions_boundary(iam, name)
        elif write.action == "attach_policy":
            _iam.attach_policy(iam, name, write.subject)
        elif write.action == "detach_policy":
            _iam.detach_policy(iam, name, write.subject)
        elif write.action == "put_inline_policy":
            _iam.put_inline_policy(iam, name, write.subject, write.value)
        elif write.action == "tag_role":
            _iam.tag_role(iam, name, write.value)
        elif write.action == "untag_role":
            _iam.untag_role(iam, name, write.value)
        elif write.action == "create_instance_profile":
            _iam.create_instance_profile(iam, name, wanted["path"])
        elif write.action == "add_role_to_instance_profile":
            _iam.add_role_to_instance_profile(iam, name, name)
        else:
            raise ValueError(f"unknown IAM write {write.action}")
    return created


def ensure(iam: Any, params: dict[str, Any], check_mode: bool) -> dict[str, Any]:
    errors = validate(params)
    if errors:
        raise InputError(errors)
    wanted_roles = [wanted_role(params, role) for role in params["roles"]]
    currents = [read_role(iam, wanted) for wanted in wanted_roles]
    plans: list[list[Write]] = []
    refusals: list[str] = []
    for current, wanted in zip(currents, wanted_roles):
        try:
            plans.append(plan(current, wanted))
        except InputError as e:
            refusals += e.errors
    if refusals:  # every role is read and planned before the first write
        raise InputError(refusals)
    roles = []
    for current, wanted, writes in zip(currents, wanted_roles, plans):
        arn = (current["role"] or {}).get("Arn")
        if writes and not check_mode:
            arn = apply(iam, wanted, writes) or arn
        roles.append({"name": wanted["name"], "arn": arn, "actions": [str(w) for w in writes]})
    return {
        "changed": any(plans),
        "roles": roles,
        "instance_profiles": [w["name"] for w in wanted_roles if w["instance_profile"]],
        "actions": [f"{role['name']}: {action}" for role in roles for action in role["actions"]],
        "diff": {
            "before": {w["name"]: summary(c) for c, w in zip(currents, wanted_roles) if c["role"] is not None},
            "after": {w["name"]: summary_after(c, w) for c, w in zip(currents, wanted_roles)},
        },
    }
