"""The `_aws` lookups that answer None for a resource that does not exist, and raise any other error. Stand-in: a
fake client whose call raises botocore's ClientError with the code (and message) AWS answers."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import cloudwatch as _cloudwatch
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ec2 as _ec2
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecr as _ecr
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws import ecs as _ecs


class Raising:
    """Every call raises the ClientError given."""

    def __init__(self, code: str, message: str = "") -> None:
        self.error = ClientError({"Error": {"Code": code, "Message": message}}, "Call")

    def __getattr__(self, name: str):
        def call(**_kwargs):
            raise self.error

        return call


def image_digest(client):
    return _ecr.image_digest(client, "123456789012", "triton", "24.08")


def task_definition(client):
    return _ecs.describe_task_definition(client, "triton:7")


def dashboard(client):
    return _cloudwatch.get_dashboard(client, "triton")


def launch_template(client):
    return _ec2.launch_template_data(client, {"LaunchTemplateName": "gpu", "Version": "$Default"})


@pytest.mark.parametrize(
    ("lookup", "code", "message"),
    [
        (image_digest, "ImageNotFoundException", ""),
        (image_digest, "RepositoryNotFoundException", ""),
        (task_definition, "ClientException", "Unable to describe task definition."),
        (dashboard, "ResourceNotFound", ""),
        *[(launch_template, code, "") for code in _ec2.MISSING_LAUNCH_TEMPLATE],
    ],
)
def test_a_missing_resource_is_none(lookup, code, message):
    assert lookup(Raising(code, message)) is None


@pytest.mark.parametrize(
    ("lookup", "code", "message"),
    [
        (image_digest, "AccessDeniedException", ""),
        (task_definition, "ClientException", "Too many concurrent attempts to create a new revision of the specified family."),
        (task_definition, "AccessDeniedException", "Unable to describe task definition."),
        (dashboard, "Throttling", ""),
        (launch_template, "UnauthorizedOperation", ""),
    ],
)
def test_any_other_error_is_raised(lookup, code, message):
    with pytest.raises(ClientError) as raised:
        lookup(Raising(code, message))
    assert raised.value.response["Error"]["Code"] == code
