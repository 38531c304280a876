# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)
"""Preflight before any write: placeholders left in the inventory, required settings, the caller's account, and
optionally its permissions. Every problem is collected, so one run names all of them."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import iam as _iam
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import identity as _identity
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import BotoCoreError, ClientError, error_code
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import preflight_inputs as _inputs

# The markers inventories/example uses for every value you must replace (docs/dry_run.md lists them).
DEFAULT_MARKERS = {
    "111111111111": "the example account id",
    "0123456789abcdef": "an example resource id",
    "00000000-0000-0000-0000-000000000000": "an example certificate id",
    r"(^|[.@/-])example(\.com|-|$)": "an example name",
    r"REPLACE_[A-Z0-9_]*": "a REPLACE_ marker",
}
_VARIABLE_FILES = ("group_vars", "host_vars")
_YAML_SUFFIXES = ("", ".yml", ".yaml", ".json")


# ---------------------------------------------------------------- pure: placeholders


def leaves(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    """(dotted path, scalar) of every scalar below `value`; list items as path[i]."""
    if isinstance(value, dict):
        for key, item in value.items():
            yield from leaves(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from leaves(item, f"{path}[{index}]")
    else:
        yield path, value


def marker_in(value: Any, markers: dict[str, str]) -> str | None:
    """What the first marker found in a value stands for, or None. Whole numbers count as their digits: an unquoted
    111111111111 (YAML, or any INI value Ansible reads as a number) is still the example account."""
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str):
        return None
    for pattern, meaning in markers.items():
        if _inputs.bounded_search(pattern, value):
            return meaning
    return None


def value_at(value: Any, path: str) -> tuple[bool, Any]:
    """(found, value) at a dotted path such as `a.b[0].c` below a top-level variable's value."""
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", path):
        if part.startswith("["):
            index = int(part[1:-1])
            if not isinstance(value, list) or index >= len(value):
                return False, None
            value = value[index]
        elif isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return False, None
    return True, value


def find_placeholders(
    documents: list[tuple[str, Any]], markers: dict[str, str], effective: dict[str, Any] | None = None
) -> list[dict[str, str]]:
    """Every value of the inventory files (path, parsed YAML) that still carries a marker.

    With `effective` (variable -> the value the play sees), a value overridden elsewhere (-e, a later file) is left
    out unless the value in force still carries a marker."""
    found = []
    for file, document in documents:
        if not isinstance(document, dict):
            continue
        for variable, raw in leaves(document, ""):
            meaning = marker_in(raw, markers)
            if meaning is None:
                continue
            top = re.split(r"[.\[]", variable, maxsplit=1)[0]
            if effective is not None and top in effective:
                present, value = value_at(effective[top], variable[len(top) :].lstrip("."))
                if not present or marker_in(value, markers) is None:
                    continue
            # A secret-looking variable's value is never returned or printed, placeholder or not.
            hidden = _inputs.is_secret_path(variable)
            found.append({"variable": variable, "file": file, "value": _inputs.HIDDEN if hidden else raw, "marker": meaning})
    return found


def placeholder_message(finding: dict[str, str]) -> str:
    value = finding["value"] if finding["value"] == _inputs.HIDDEN else repr(finding["value"])
    return f"{finding['variable']} = {value} in {finding['file']}: {finding['marker']}, replace it with yours"


def placeholders_in_force(values: dict[str, Any] | None, reported: set[str], markers: dict[str, str]) -> list[str]:
    """Placeholders in the values the play sees that no inventory file showed (an inventory the preflight could not
    read, such as a script, or -e): one problem each, the variable named, a secret's value not shown."""
    problems = []
    for variable, value in leaves(values or {}, ""):
        meaning = marker_in(value, markers)
        if meaning and re.split(r"[.\[]", variable, maxsplit=1)[0] not in reported:
            problems.append(
                f"{variable} = {_inputs.shown(variable, value)} (from an inventory source the preflight could not read, or "
                f"-e): {meaning}, replace it with yours"
            )
    return problems


# ---------------------------------------------------------------- pure: settings


def _missing(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def check_settings(settings: list[dict[str, Any]]) -> list[str]:
    """One message per required setting that is missing or malformed: name, value, fix.

    Each setting: {name, value, fix, pattern (optional, matched against the value or each item of a list),
    applies (optional, false skips it)}."""
    problems = []
    for setting in settings:
        if not setting.get("applies", True):
            continue
        name, value, fix = setting["name"], setting.get("value"), setting["fix"]
        if _missing(value):
            problems.append(f"{name} is missing: {fix}")
            continue
        pattern = setting.get("pattern")
        items = value if isinstance(value, list) else [value]
        bad = [item for item in items if pattern and not _inputs.bounded_search(pattern, str(item))]
        if bad:
            shown = bad if isinstance(value, list) else bad[0]
            problems.append(f"{name} is {_inputs.HIDDEN if _inputs.is_secret_path(name) else repr(shown)}: {fix}")
    return problems


def check_agreements(agreements: list[dict[str, Any]]) -> list[str]:
    """One message per group of settings that must hold one value and do not: every value named, then the fix.

    Each agreement: {what, values (setting name -> value; unset ones, None or "", are left out), fix}."""
    problems = []
    for agreement in agreements:
        given = {name: value for name, value in agreement["values"].items() if not _missing(value)}
        if len({json.dumps(value, sort_keys=True) for value in given.values()}) > 1:
            named = ", ".join(f"{name} = {_inputs.shown(name, value)}" for name, value in given.items())
            problems.append(f"{agreement['what']} differs: {named}: {agreement['fix']}")
    return problems


# ---------------------------------------------------------------- pure: account and permissions


def account_problem(expected: str, caller: dict[str, str], profile: str | None, region: str) -> str | None:
    if expected == caller["Account"]:
        return None
    return (
        f"the credentials in use belong to account {caller['Account']} ({caller['Arn']}), but this inventory's "
        f"aws_account_id is {expected} (region {region}): switch to that account's credentials "
        f"(AWS_PROFILE=<its profile>, or aws_profile in the inventory{'; now ' + repr(profile) if profile else ''}; "
        "`aws sso login --profile <its profile>` for SSO), or fix aws_account_id"
    )


def principal_arn(caller_arn: str) -> str:
    """The IAM principal the simulator evaluates: an assumed role's session ARN becomes its role's ARN."""
    match = re.match(r"^arn:([^:]+):sts::(\d{12}):assumed-role/([^/]+)/", caller_arn)
    if match:
        partition, account, role = match.groups()
        return f"arn:{partition}:iam::{account}:role/{role}"
    return caller_arn


# The instance that stands for every instance in the status-write simulation (the id is the shape AWS documents).
SAMPLE_INSTANCE_ID = "i-0123456789abcdef0"


def status_write_request(caller_arn: str, region: str, spec: dict[str, Any]) -> dict[str, Any]:
    """What a model agent's status write looks like to IAM: the instance role, s3:PutObject on the status object of
    one instance, and the request context key ec2:SourceInstanceARN that AWS sets on requests signed with the role
    credentials of that instance (docs/iam.md, 'The status write')."""
    partition, account = caller_arn.split(":")[1], caller_arn.split(":")[4]
    path = "/" + (spec.get("role_path") or "/").strip("/") + "/" if (spec.get("role_path") or "/").strip("/") else "/"
    prefix = (spec.get("prefix") or "").strip("/")
    key = f"{prefix + '/' if prefix else ''}status/{spec['application']}/{SAMPLE_INSTANCE_ID}.json"
    return {
        "principal": f"arn:{partition}:iam::{account}:role{path}{spec['role_name']}",
        "action": "s3:PutObject",
        "resource": f"arn:{partition}:s3:::{spec['bucket']}/{key}",
        "context": {"ec2:SourceInstanceARN": f"arn:{partition}:ec2:{region or 'us-east-1'}:{account}:instance/{SAMPLE_INSTANCE_ID}"},
    }


def status_write_problem(request: dict[str, Any], evaluation_results: list[dict[str, Any]]) -> str:
    """'' when the simulator allows the status write; else the problem with its fix."""
    if evaluation_results and all(r.get("EvalDecision") == "allowed" for r in evaluation_results):
        return ""
    decision = ", ".join(sorted({str(r.get("EvalDecision")) for r in evaluation_results})) or "no answer"
    return (
        f"the instance role {request['principal']} may not write its status object {request['resource']} with "
        f"ec2:SourceInstanceARN={request['context']['ec2:SourceInstanceARN']} (IAM policy simulator: {decision}): no "
        "release would ever converge; render its policy with roles/fleet_iam (statement ModelAgentOwnStatus, docs/iam.md)"
    )


def denied_actions(evaluation_results: list[dict[str, Any]]) -> list[str]:
    return sorted(r["EvalActionName"] for r in evaluation_results if r.get("EvalDecision") != "allowed")


def policy_actions(markdown: str, section: str) -> list[str]:
    """The actions of every JSON policy under the `### <section>` heading of docs/iam.md (up to the next heading)."""
    parts = re.split(rf"^#+ {re.escape(section)}\s*$", markdown, maxsplit=1, flags=re.M)
    if len(parts) < 2:
        return []
    body = re.split(r"^#+ ", parts[1], maxsplit=1, flags=re.M)[0]
    actions: set[str] = set()
    for block in re.findall(r"```json\n(.*?)```", body, re.S):
        for statement in json.loads(block).get("Statement", []):
            action = statement.get("Action", [])
            actions.update([action] if isinstance(action, str) else action)
    return sorted(actions)


def inventory_files(sources: list[str]) -> list[Path]:
    """The inventory files Ansible reads variables from: each source and its group_vars/ and host_vars/."""
    files: list[Path] = []
    for source in sources:
        root = Path(source)
        if root.is_file():
            files.append(root)
            root = root.parent
        elif root.is_dir():
            files += sorted(p for p in root.iterdir() if p.is_file() and p.suffix in _YAML_SUFFIXES)
        for kind in _VARIABLE_FILES:
            if (root / kind).is_dir():
                files += sorted(p for p in (root / kind).rglob("*") if p.is_file() and p.suffix in _YAML_SUFFIXES)
    return files


def shown_path(path: Path, base_dir: str | None) -> str:
    """A path relative to the directory ansible-playbook ran in, when it lies below it (as the user typed it)."""
    if base_dir and path.resolve().is_relative_to(Path(base_dir).resolve()):
        return os.path.relpath(path.resolve(), Path(base_dir).resolve())
    return str(path)


# ---------------------------------------------------------------- the module's run


def run(params: dict[str, Any], documents: list[tuple[str, Any]], sts: Any, iam: Any | None) -> dict[str, Any]:
    """Collects every problem; `sts` is None when the credentials could not be set up (the reason is in params).

    Bad options of its own (a marker or pattern that is no regular expression, or would backtrack without end; a
    setting without name or fix) are the only problems reported then: the checks that would use them do not run."""
    result: dict[str, Any] = {"region": params["region"], "account_id": params["account_id"], "caller": {}, "missing_permissions": []}
    own = _inputs.input_problems(params)
    if own:
        return {**result, "placeholders": [], "problems": own}
    try:
        return _run(params, documents, sts, iam, result)
    except _inputs.PatternTimeout as e:
        return {
            **result,
            "placeholders": [],
            "problems": [
                f"the pattern {e.args[0]!r} took more than {_inputs.MATCH_TIMEOUT_S:g} s on one value: simplify it (a "
                "character class repeated once, anchored with ^ and $)"
            ],
        }


def _run(params: dict[str, Any], documents: list[tuple[str, Any]], sts: Any, iam: Any | None, result: dict[str, Any]) -> dict[str, Any]:
    markers = params["markers"] or DEFAULT_MARKERS
    placeholders = find_placeholders(documents, markers, params.get("values"))
    problems = [placeholder_message(p) for p in placeholders]
    # A setting that is still a placeholder is reported once, as a placeholder.
    reported = {re.split(r"[.\[]", p["variable"], maxsplit=1)[0] for p in placeholders}
    problems += placeholders_in_force(params.get("values"), reported | _variables_of(documents), markers)
    problems += check_settings([s for s in params["settings"] if s["name"] not in reported])
    problems += check_agreements(params.get("agreements") or [])
    # The account id itself: empty or malformed, the account check below could not run (unless a setting checks it).
    checked = {s["name"] for s in params["settings"] if s.get("applies", True)} | reported
    account_problem_found = _inputs.account_id_problem(params["account_id"], marker_in(params["account_id"], markers) is not None)
    if account_problem_found and "aws_account_id" not in checked:
        problems.append(account_problem_found)
    if params.get("credentials_problem"):
        problems.append(params["credentials_problem"])
    elif sts is not None:
        try:
            caller = _identity.get_caller_identity(sts)
        except (BotoCoreError, ClientError) as e:
            problems.append(f"cannot read the caller identity ({error_code(e) or e}): check the profile or credentials in use")
            caller = None
        if caller:
            result["caller"] = caller
            if params["account_id"] and marker_in(params["account_id"], markers) is None:
                problem = account_problem(params["account_id"], caller, params.get("profile"), params["region"])
                if problem:
                    problems.append(problem)
            if params["simulate_iam"] and iam is not None:
                principal = params.get("principal_arn") or principal_arn(caller["Arn"])
                try:
                    result["missing_permissions"] = denied_actions(_iam.simulate_principal_policy(iam, principal, params["iam_actions"]))
                except (BotoCoreError, ClientError) as e:
                    problems.append(
                        f"cannot simulate the permissions of {principal} ({error_code(e) or e}): the caller needs "
                        "iam:SimulatePrincipalPolicy; give preflight_iam_principal_arn when the role has a path"
                    )
                if result["missing_permissions"]:
                    problems.append(
                        f"{principal} may not call {', '.join(result['missing_permissions'])} (IAM policy simulator, on "
                        "resource '*'): add them to its policy (docs/iam.md)"
                    )
                if params.get("status_write"):
                    request = status_write_request(caller["Arn"], params["region"], params["status_write"])
                    try:
                        answer = _iam.simulate_with_context(
                            iam, request["principal"], request["action"], request["resource"], request["context"]
                        )
                    except (BotoCoreError, ClientError) as e:
                        problems.append(f"cannot simulate the status write of {request['principal']} ({error_code(e) or e})")
                    else:
                        problem = status_write_problem(request, answer)
                        result["status_write_allowed"] = not problem
                        if problem:
                            problems.append(problem)
    result["placeholders"] = placeholders
    result["problems"] = problems
    return result


def _variables_of(documents: list[tuple[str, Any]]) -> set[str]:
    """The variables the inventory files set (keys at any depth: a YAML inventory nests them under all.vars or a
    host): a placeholder in force there was reported with its file."""
    names: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            names.update(str(key) for key in value)
            for item in value.values():
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for _file, document in documents:
        walk(document)
    return names
