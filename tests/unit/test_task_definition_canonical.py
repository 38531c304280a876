"""canonicalise and diff: defaults, sorting, pass-through of unknown fields, readable paths."""

from __future__ import annotations

from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.canonical import (
    canonicalise,
    diff,
    diff_paths,
    from_describe,
)
from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.render import render

from .task_definition_params import module_params


def container(**fields):
    return {"name": "c", "image": "repo@sha256:" + "a" * 64, "memory": 128, **fields}


def td(*containers, **fields):
    return {"family": "f", "networkMode": "awsvpc", "containerDefinitions": list(containers), **fields}


def test_defaults_aws_fills_compare_equal():
    sent = td(container(portMappings=[{"containerPort": 80}], healthCheck={"command": ["CMD", "true"]}))
    described = td(
        container(
            cpu=0,
            essential=True,
            portMappings=[{"containerPort": 80, "hostPort": 80, "protocol": "tcp"}],
            healthCheck={"command": ["CMD", "true"], "interval": 30, "timeout": 5, "retries": 3},
            environment=[],
            mountPoints=[],
            volumesFrom=[],
            systemControls=[],
        ),
        volumes=[],
        placementConstraints=[],
        revision=3,
        status="ACTIVE",
        enableFaultInjection=False,
    )
    assert canonicalise(sent) == canonicalise(described)


def test_bridge_dynamic_port_is_host_port_zero_not_container_port():
    sent = td(container(portMappings=[{"containerPort": 80}]), networkMode="bridge")
    assert canonicalise(sent)["containerDefinitions"][0]["portMappings"] == [{"containerPort": 80, "hostPort": 0, "protocol": "tcp"}]
    fixed = td(container(portMappings=[{"containerPort": 80, "hostPort": 80}]), networkMode="bridge")
    assert canonicalise(sent) != canonicalise(fixed)


def test_missing_network_mode_is_bridge():
    sent = {"family": "f", "containerDefinitions": [container()]}
    assert canonicalise(sent) == canonicalise(td(container(), networkMode="bridge"))


def test_order_free_lists_are_sorted_but_commands_keep_order():
    a = td(container(environment=[{"name": "B", "value": "2"}, {"name": "A", "value": "1"}], command=["x", "y"]))
    b = td(container(environment=[{"name": "A", "value": "1"}, {"name": "B", "value": "2"}], command=["x", "y"]))
    c = td(container(environment=[{"name": "A", "value": "1"}, {"name": "B", "value": "2"}], command=["y", "x"]))
    assert canonicalise(a) == canonicalise(b)
    assert canonicalise(b) != canonicalise(c)


def test_unknown_fields_pass_through_and_count():
    a = td(container(futureField={"x": 1}), futureTaskField="on")
    canonical = canonicalise(a)
    assert canonical["futureTaskField"] == "on"
    assert canonical["containerDefinitions"][0]["futureField"] == {"x": 1}
    assert canonicalise(a) != canonicalise(td(container(futureField={"x": 2}), futureTaskField="on"))


def test_explicit_values_that_differ_from_defaults_are_changes():
    assert canonicalise(td(container(essential=False))) != canonicalise(td(container()))
    assert canonicalise(td(container(healthCheck={"command": ["CMD", "t"], "retries": 5}))) != canonicalise(
        td(container(healthCheck={"command": ["CMD", "t"]}))
    )


def test_tags_come_from_outside_the_task_definition():
    response = {"taskDefinition": td(container()), "tags": [{"key": "b", "value": "2"}, {"key": "a", "value": "1"}]}
    assert canonicalise(from_describe(response))["tags"] == [{"key": "a", "value": "1"}, {"key": "b", "value": "2"}]
    assert canonicalise(from_describe(response)) != canonicalise(td(container()))


def test_diff_paths_name_containers_and_fields():
    before = canonicalise(td(container(image="r@sha256:" + "1" * 64)))
    after = canonicalise(td(container(image="r@sha256:" + "2" * 64), tags=[{"key": "k", "value": "v"}]))
    assert diff_paths(before, after) == ["containerDefinitions[c].image", "tags"]


def test_diff_of_nothing_is_everything():
    desired = render(module_params(), "us-east-1")
    result = diff(None, desired)
    assert result["before"] == {}
    assert result["after"] == canonicalise(desired)
    assert "containerDefinitions" in result["paths"]


def test_rendered_definition_round_trips_through_an_aws_shaped_answer():
    """What render() registers, with the fields AWS adds and the defaults it fills, compares equal."""
    desired = render(module_params(environment={"B": "2", "A": "1"}, tags={"team": "ml"}), "us-east-1")
    aws = {k: v for k, v in desired.items() if k != "tags"}
    aws["containerDefinitions"] = [
        {
            **c,
            "cpu": 0,
            "volumesFrom": [],
            "systemControls": [],
            "mountPoints": [],
            "portMappings": [dict(p, hostPort=p["containerPort"]) for p in c["portMappings"]],
            "logConfiguration": {**c["logConfiguration"], "secretOptions": []},
        }
        for c in desired["containerDefinitions"]
    ]
    aws.update(taskDefinitionArn="arn:aws:ecs:us-east-1:123456789012:task-definition/triton:1", revision=1, status="ACTIVE")
    aws.update(compatibilities=["EC2"], requiresAttributes=[{"name": "ecs.capability.task-eni"}], volumes=[], placementConstraints=[])
    response = {"taskDefinition": aws, "tags": [{"key": "team", "value": "ml"}]}
    assert diff(from_describe(response), desired)["paths"] == []
