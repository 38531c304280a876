"""The preflight as an attacker and an unlucky operator use it (issue 28, classes "secrets in preflight", "false
success" and "preflight's own patterns"): secrets among the values it is given, INI inventories, an empty account id,
malformed options, and regular expressions that crash or backtrack without end.

Stand-ins: none for the pure logic (parsed inventories as the module reads them, dicts shaped like STS's answer);
tests/integration/test_adversarial_preflight.py runs the play at -vvv with the json callback. Patterns, option
shapes and INI inventories are generated (property-style, fixed seeds).
"""

from __future__ import annotations

import random
import re
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import preflight as _preflight
from ansible_collections.inferops.triton_ecs.plugins.module_utils._fleet import preflight_inputs as _inputs

PASSWORD = "planted-password-9c2e"
TOKEN = "hf_PlantedToken0123456789abcdefghijkl"
CALLER = {"Account": "123456789012", "Arn": "arn:aws:iam::123456789012:user/ci", "UserId": "AIDA"}


class FakeSts:
    """Stands in for STS at the client-function boundary (identity.get_caller_identity calls it)."""

    def get_caller_identity(self, **_kwargs: Any) -> dict[str, str]:
        return dict(CALLER)


def params(**overrides: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "markers": {},
        "values": {},
        "settings": [],
        "agreements": [],
        "account_id": "123456789012",
        "region": "eu-west-1",
        "simulate_iam": False,
        "iam_actions": [],
    }
    values.update(overrides)
    return values


def run(documents: list | None = None, **overrides: Any) -> dict[str, Any]:
    return _preflight.run(params(**overrides), documents or [], FakeSts(), None)


# ---------------------------------------------------------------- secrets


def test_adversarial_preflight_secret_values_are_masked_and_never_printed():
    documents = [
        (
            "inv/group_vars/all/registry.yml",
            {"triton_image_registry_password": f"REPLACE_ME_{PASSWORD}", "model_repository": {"hf_token": f"REPLACE_{TOKEN}"}},
        )
    ]
    values = {"triton_image_registry_password": f"REPLACE_ME_{PASSWORD}", "model_repository": {"hf_token": f"REPLACE_{TOKEN}"}}
    settings = [{"name": "triton_image_registry_password", "value": PASSWORD, "pattern": "^x$", "fix": "the password"}]
    agreements = [{"what": "the token", "values": {"model_repository_hf_token": TOKEN, "triton_token": "other-token-value"}, "fix": "one"}]
    result = run(documents, values=values, settings=settings, agreements=agreements)
    text = repr(result)
    assert PASSWORD not in text and TOKEN not in text and "other-token-value" not in text
    assert {p["variable"] for p in result["placeholders"]} == {"triton_image_registry_password", "model_repository.hf_token"}
    assert all(p["value"] == _inputs.HIDDEN for p in result["placeholders"])
    hidden = _inputs.secret_values(params(values=values, settings=settings, agreements=agreements))
    assert {f"REPLACE_ME_{PASSWORD}", f"REPLACE_{TOKEN}", PASSWORD, TOKEN, "other-token-value"} <= hidden


def test_adversarial_preflight_the_invocation_holds_no_secret_of_any_length():
    given = params(
        values={"triton_image_registry_password": "pw", "aws_region": "eu-west-1", "deploy": {"token": "t", "n": 2}},
        settings=[{"name": "model_repository_hf_token", "value": "x", "fix": "f"}, "malformed"],
        agreements=[{"what": "w", "values": {"a_secret": "s", "b": "v"}, "fix": "f"}, {"values": None}],
    )
    shown = _inputs.redacted(given)
    assert shown["values"] == {
        "triton_image_registry_password": _inputs.HIDDEN,
        "aws_region": "eu-west-1",
        "deploy": {"token": _inputs.HIDDEN, "n": 2},
    }
    assert shown["settings"][0]["value"] == _inputs.HIDDEN and shown["settings"][1] == "malformed"
    assert shown["agreements"][0]["values"] == {"a_secret": _inputs.HIDDEN, "b": "v"} and shown["agreements"][1] == {"values": None}
    assert given["values"]["triton_image_registry_password"] == "pw"  # the checks still see the real value


@pytest.mark.parametrize(
    ("path", "secret"),
    [
        ("triton_image_registry_password", True),
        ("model_repository_hf_token", True),
        ("aws_secret_key", True),
        ("aws_access_key", True),
        ("deploy.registry.PASSWD", True),
        ("fleet_iam_private_key", True),
        ("triton_private_subnets[0]", False),
        ("fleet_capacity_key_name", True),
        ("task_definition_environment.HF_TOKEN", True),
        ("fleet_cluster_name", False),
        ("bluegreen_cutover_monkey_s", False),
    ],
)
def test_adversarial_preflight_secret_names(path, secret):
    assert _inputs.is_secret_path(path) is secret


# ---------------------------------------------------------------- false success


def test_adversarial_preflight_an_empty_or_malformed_account_id_is_a_problem():
    for account in ("", " ", "12345", "12345678901x", "1234567890123"):
        problems = run(account_id=account)["problems"]
        assert any(p.startswith(f"aws_account_id is {account!r}") for p in problems), (account, problems)
    assert run()["problems"] == []
    # the example account is a placeholder, reported as one (by the file), not twice
    result = run(
        [("inv/aws.yml", {"aws_account_id": "111111111111"})], account_id="111111111111", values={"aws_account_id": "111111111111"}
    )
    assert [p for p in result["problems"] if "aws_account_id" in p] == [
        "aws_account_id = '111111111111' in inv/aws.yml: the example account id, replace it with yours"
    ]


def test_adversarial_preflight_a_placeholder_from_a_source_it_cannot_read_is_named():
    """A value the play sees (an inventory script, -e) that still carries a marker fails the preflight."""
    problems = run(values={"triton_vpc_id": "vpc-0123456789abcdef0", "fleet_cluster_name": "inference"})["problems"]
    assert problems == [
        "triton_vpc_id = 'vpc-0123456789abcdef0' (from an inventory source the preflight could not read, or -e): an example "
        "resource id, replace it with yours"
    ]


def test_adversarial_preflight_an_unquoted_example_account_is_still_a_placeholder():
    found = _preflight.find_placeholders([("inv/aws.yml", {"aws_account_id": 111111111111})], _preflight.DEFAULT_MARKERS)
    assert [p["variable"] for p in found] == ["aws_account_id"]


INI_CASES = 150
PLACEHOLDERS = ["111111111111", "REPLACE_ME", "sg-0123456789abcdef0", "triton.example.com"]
REAL = ["210987654321", "eu-west-1", "sg-0a1b2c3d4e5f6a7b8", "inference", "/mnt/models"]


def test_adversarial_preflight_generated_ini_inventories_are_read():
    """Every variable of a generated INI inventory (group vars, host vars, quoted or not) is read; exactly the ones
    that carry a marker are placeholders."""
    rng = random.Random(28)
    for case in range(INI_CASES):
        variables = {f"var_{i}": rng.choice(PLACEHOLDERS + REAL) for i in range(rng.randint(1, 6))}
        names = list(variables)
        host_vars = names[: rng.randint(0, len(names))]
        lines = ["# an INI inventory", "[triton]"]
        pairs = " ".join(f'{n}="{variables[n]}"' if rng.random() < 0.3 else f"{n}={variables[n]}" for n in host_vars)
        lines.append(f"controller ansible_connection=local {pairs}".rstrip())
        lines += ["", "[triton:vars]"] + [
            f"{n} = {variables[n]}" if rng.random() < 0.5 else f"{n}={variables[n]}" for n in names[len(host_vars) :]
        ]
        document = _inputs.parse_ini_inventory("\n".join(lines) + "\n")
        assert document is not None and {n: document[n] for n in names} == variables, (case, lines, document)
        found = {p["variable"] for p in _preflight.find_placeholders([("hosts.ini", document)], _preflight.DEFAULT_MARKERS)}
        assert found == {n for n, v in variables.items() if v in PLACEHOLDERS}, (case, lines)
    assert _inputs.parse_ini_inventory("#!/usr/bin/env python3\nprint('{}')\n") is None


# ---------------------------------------------------------------- the preflight's own options

CATASTROPHIC = [
    r"(a+)+$",
    r"(a|a)*b",
    r"(a|ab)*c",
    r"^(\w+\s?)*$",
    r"(.*a){12}",
    r"(\d+)*x",
    r"((ab)*)+y",
    r"(a*)*b",
    r"(x+x+)+y",
    r"(a)\1",
]
# The collection's own: the default markers and every pattern of playbooks/vars/preflight.yml.
PLAY_SETTINGS = yaml.safe_load((Path(__file__).resolve().parents[2] / "playbooks" / "vars" / "preflight.yml").read_text())
SAFE_PATTERNS = [*_preflight.DEFAULT_MARKERS, *(s["pattern"] for s in PLAY_SETTINGS["preflight_settings"] if "pattern" in s)]


@pytest.mark.parametrize("pattern", CATASTROPHIC)
def test_adversarial_preflight_patterns_that_backtrack_without_end_are_refused(pattern):
    problems = run(settings=[{"name": "x", "value": "a" * 40, "pattern": pattern, "fix": "f"}])["problems"]
    assert len(problems) == 1 and problems[0].startswith("settings[0].pattern"), problems
    assert "e.g. (-[a-z]+)+" in problems[0] or "back-reference" in problems[0], problems
    problems = run(markers={pattern: "a marker"})["problems"]
    assert len(problems) == 1 and problems[0].startswith(f"markers: the pattern {pattern!r}")


@pytest.mark.parametrize("pattern", SAFE_PATTERNS)
def test_adversarial_preflight_the_collections_own_patterns_pass(pattern):
    assert _inputs.pattern_problem(pattern) is None


@pytest.mark.parametrize(
    ("overrides", "start"),
    [
        ({"markers": {"([": "broken"}}, "markers: the pattern '(['"),
        ({"markers": {"x": 3}}, "markers.x: 3 is not text"),
        ({"settings": [{"value": "v", "fix": "f"}]}, "settings[0].name is None"),
        ({"settings": [{"name": "n", "value": "v"}]}, "settings[0].fix is None"),
        ({"settings": [{"name": "n", "value": "v", "fix": "f", "pattern": 12}]}, "settings[0].pattern 12 (setting n) is a int"),
        ({"settings": ["aws_region"]}, "settings[0] is str"),
        ({"agreements": [{"what": "w", "values": ["a"], "fix": "f"}]}, "agreements[0].values is ['a']"),
        ({"agreements": [{"values": {}}]}, "agreements[0].what is None"),
    ],
)
def test_adversarial_preflight_malformed_options_are_named_not_crashed_on(overrides, start):
    problems = run(**overrides)["problems"]
    assert any(p.startswith(start) for p in problems), problems


ATOMS = ["a", "b", "-", r"\.", "[a-z]", r"\d", ".", "[^x]", r"\w", "ab"]
QUANTIFIERS = ["", "", "*", "+", "?", "{2}", "{1,3}", "{2,}"]


def _pattern(rng: random.Random, depth: int = 0) -> str:
    parts = []
    for _i in range(rng.randint(1, 3)):
        roll = rng.random()
        if depth < 3 and roll < 0.25:
            inner = _pattern(rng, depth + 1)
            if rng.random() < 0.4:
                inner += "|" + _pattern(rng, depth + 1)
            atom = f"({inner})" if rng.random() < 0.5 else f"(?:{inner})"
        else:
            atom = rng.choice(ATOMS)
        parts.append(atom + rng.choice(QUANTIFIERS))
    prefix = "^" if depth == 0 and rng.random() < 0.4 else ""
    suffix = "$" if depth == 0 and rng.random() < 0.6 else ""
    return prefix + "".join(parts) + suffix


def _texts(rng: random.Random) -> list[str]:
    alphabet = "ab-.1x "
    return ["a" * 48 + "!", "-a" * 24 + "!", "ab" * 24 + "!", "1" * 48 + "x", "".join(rng.choice(alphabet) for _i in range(64))]


PATTERN_CASES = 400


def test_adversarial_preflight_generated_patterns_are_refused_or_end_quickly():
    """Whatever pattern it is given, the preflight answers: refused with a reason, or matched on long adversarial
    values within its time bound (the static check catches the exponential shapes before they run)."""
    rng = random.Random(28)
    accepted = refused = 0
    for case in range(PATTERN_CASES):
        pattern = _pattern(rng)
        problem = _inputs.pattern_problem(pattern)
        if problem:
            refused += 1
            continue
        accepted += 1
        for text in _texts(rng):
            started = time.monotonic()
            _inputs.bounded_search(pattern, text, timeout_s=5.0)  # PatternTimeout would fail the test
            assert time.monotonic() - started < 1.0, (case, pattern, text)
    assert accepted > PATTERN_CASES // 4 and refused > PATTERN_CASES // 20, (accepted, refused)


def test_adversarial_preflight_a_slow_pattern_is_stopped_by_the_time_bound():
    """What the static check lets through (a polynomial blow-up) still ends: the run names the pattern."""
    slow = "^" + "[a-z]*" * 8 + "!$"
    assert _inputs.pattern_problem(slow) is None
    started = time.monotonic()
    with pytest.raises(_inputs.PatternTimeout):
        _inputs.bounded_search(slow, "a" * 400, timeout_s=0.3)
    assert time.monotonic() - started < 2.0
    problems = _preflight.run(params(settings=[{"name": "x", "value": "a" * 400, "pattern": slow, "fix": "f"}]), [], FakeSts(), None)[
        "problems"
    ]
    assert len(problems) == 1 and problems[0].startswith(f"the pattern {slow!r} took more than")


OPTION_CASES = 200


def test_adversarial_preflight_generated_option_shapes_never_crash_it():
    rng = random.Random(2028)
    shapes = [None, "", "text", 3, [], {}, ["a"], {"k": "v"}, "([", r"(a+)+"]
    for case in range(OPTION_CASES):
        setting = {k: rng.choice(shapes) for k in ("name", "value", "fix", "pattern") if rng.random() < 0.8}
        agreement = {k: rng.choice(shapes) for k in ("what", "values", "fix") if rng.random() < 0.8}
        markers = {rng.choice(["REPLACE_", "([", r"(a|a)*", "x"]): rng.choice(["m", 3])}
        result = run(
            [("inv.yml", {"v": "REPLACE_1"})],
            settings=[setting] if rng.random() < 0.7 else [rng.choice(shapes)],
            agreements=[agreement],
            markers=markers,
            values={"v": "REPLACE_1"},
        )
        assert isinstance(result["problems"], list), case
        assert all(isinstance(p, str) and p for p in result["problems"]), (case, result["problems"])


def test_adversarial_preflight_re_is_still_what_it_uses():
    """The time bound wraps Python's own engine: a match it allows is re.search's match."""
    assert _inputs.bounded_search(r"sg-[0-9a-f]+", "x sg-0abc y").group(0) == re.search(r"sg-[0-9a-f]+", "x sg-0abc y").group(0)
