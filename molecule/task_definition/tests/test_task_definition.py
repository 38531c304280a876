"""Verify: moto holds one revision of the family, rendered from what the fleet roles published and the module's own
defaults (each written once, in its argument spec)."""

from __future__ import annotations


def _revision(aws_client) -> dict:
    ecs = aws_client("ecs")
    assert ecs.list_task_definitions(familyPrefix="molecule-triton")["taskDefinitionArns"][-1].endswith(":1")
    return ecs.describe_task_definition(taskDefinition="molecule-triton")["taskDefinition"]


def test_one_revision_after_converge_and_idempotence(aws_client):
    arns = aws_client("ecs").list_task_definitions(familyPrefix="molecule-triton")["taskDefinitionArns"]
    assert [arn.rsplit("/", 1)[-1] for arn in arns] == ["molecule-triton:1"]


def test_wired_from_what_the_fleet_roles_published(aws_client):
    revision = _revision(aws_client)
    triton = next(c for c in revision["containerDefinitions"] if c["name"] == "triton")
    assert revision["executionRoleArn"] == "arn:aws:iam::123456789012:role/triton-task-execution"
    assert revision["taskRoleArn"] == "arn:aws:iam::123456789012:role/triton-task"
    assert triton["logConfiguration"]["options"] == {
        "awslogs-group": "/ecs/molecule-triton",
        "awslogs-region": "us-east-1",
        "awslogs-stream-prefix": "triton",
    }
    volumes = {v["name"]: v for v in revision["volumes"]}
    mounts = {m["sourceVolume"]: m for m in triton["mountPoints"]}
    host_volumes = [name for name, v in volumes.items() if v.get("host", {}).get("sourcePath") == "/srv/inferops/models"]
    assert len(host_volumes) == 1 and mounts[host_volumes[0]]["readOnly"] is True


def test_the_module_defaults_apply_where_the_role_sets_nothing(aws_client):
    revision = _revision(aws_client)
    triton = next(c for c in revision["containerDefinitions"] if c["name"] == "triton")
    env = {e["name"]: e["value"] for e in triton["environment"]}
    assert revision["networkMode"] == "awsvpc"
    assert triton["stopTimeout"] == 90
    assert env["TRITON_MODEL_REPOSITORY"] == "/models"
    assert {"type": "GPU", "value": "1"} in triton["resourceRequirements"]
    assert env["TRITON_LOAD_MODELS"] == "simple"
