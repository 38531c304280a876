"""Adversarial secret values handed to task_definition (issue 12, class 2): which values the module hides.

Stand-in: none (the module's parameters as Ansible hands them over); tests/integration/test_adversarial_secrets.py
greps real playbook output for the same kinds of values.
"""

from __future__ import annotations

import pytest

from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.secrets import values_to_hide

ARN = "arn:aws:secretsmanager:us-east-1:123456789012:secret:triton/hf-token-AbCdEf"
PARAM = "arn:aws:ssm:us-east-1:123456789012:parameter/triton/db"


@pytest.mark.parametrize(
    ("params", "hidden"),
    [
        ({"secrets": {"DB_PASSWORD": "hunter2-plain"}}, {"hunter2-plain"}),
        ({"secrets": {"DB_PASSWORD": ARN, "API": PARAM}}, set()),
        ({"secrets": {"DB_PASSWORD": ARN + "\n"}}, {ARN + "\n"}),  # refused (newline): may be anything
        ({"secrets": {"N": 12345678}}, {"12345678"}),
        ({"environment": {"MODEL_API_KEY": "sk-live-abcdef"}}, {"sk-live-abcdef"}),
        ({"environment": {"DB_PASSWORD": "abc"}}, set()),  # too short to mask without garbling the result
        ({"environment": {"LOG_LEVEL": "verbose-debug"}}, set()),
        ({"environment": {"hf_token": "hf_abcdefgh"}}, {"hf_abcdefgh"}),
        ({"extra_containers": [{"name": "s", "secrets": [{"name": "T", "value": "plain-token-1"}]}]}, {"plain-token-1"}),
        ({"extra_containers": [{"name": "s", "secrets": [{"name": "T", "valueFrom": ARN}]}]}, set()),
        (
            {"extra_containers": [{"name": "s", "environment": [{"name": "AWS_SECRET_ACCESS_KEY", "value": "wJalrXUtnFEMI"}]}]},
            {"wJalrXUtnFEMI"},
        ),
        ({"container_overrides": {"secrets": [{"name": "HF_TOKEN", "valueFrom": "not-an-arn-value"}]}}, {"not-an-arn-value"}),
        ({"container_overrides": {"environment": [{"name": "PRIVATE_KEY", "value": "-----BEGIN"}]}}, {"-----BEGIN"}),
        ({"container_overrides": "secrets", "extra_containers": ["x", None]}, set()),  # malformed shapes are refused elsewhere
    ],
)
def test_adversarial_secret_values_hidden(params, hidden):
    """Stand-in: none. Every plain value where an ARN belongs, and every long enough value of a variable whose name
    says secret, is registered for Ansible to mask; ARNs and ordinary variables stay readable."""
    assert values_to_hide(params) == hidden
