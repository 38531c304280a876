"""render: the GPU specifics of a Triton task definition."""

from __future__ import annotations

from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.render import render

from .task_definition_params import IMAGE, ROLE, SSM_ARN, module_params


def triton(definition):
    return next(c for c in definition["containerDefinitions"] if c["name"] == "triton")


def test_gpu_specifics():
    td = render(module_params(gpu_count=2), "us-east-1")
    c = triton(td)
    assert td["requiresCompatibilities"] == ["EC2"]
    assert td["networkMode"] == "awsvpc"
    assert c["resourceRequirements"] == [{"type": "GPU", "value": "2"}]
    assert {"name": "memlock", "softLimit": -1, "hardLimit": -1} in c["ulimits"]
    assert c["linuxParameters"] == {"initProcessEnabled": True, "sharedMemorySize": 1024}
    assert c["stopTimeout"] == 90
    assert c["image"] == IMAGE
    assert c["memory"] == 16000
    assert c["memoryReservation"] == 15000
    assert [p["containerPort"] for p in c["portMappings"]] == [8000, 8001, 8002]


def test_cpu_only_has_no_gpu_requirement():
    assert "resourceRequirements" not in triton(render(module_params(gpu_count=0)))


def env(container):
    return {e["name"]: e["value"] for e in container["environment"]}


def test_triton_is_configured_through_the_entrypoint_environment():
    params = module_params(
        gpu_count=2,
        triton={
            "models": ["a", "b"],
            "exit_timeout_s": 20,
            "drain_timeout_s": 25,
            "cuda_memory_pool_bytes": 1024,
            "extra_args": ["--log-verbose=1"],
        },
    )
    c = triton(render(params))
    assert env(c) == {
        "TRITON_MODEL_REPOSITORY": "/models",
        "TRITON_MODEL_CONTROL_MODE": "explicit",
        "TRITON_LOAD_MODELS": "a,b",
        "TRITON_EXIT_TIMEOUT_S": "20",
        "TRITON_DRAIN_TIMEOUT_S": "25",
        "TRITON_HTTP_PORT": "8000",
        "TRITON_GRPC_PORT": "8001",
        "TRITON_METRICS_PORT": "8002",
        "TRITON_REQUIRE_GPU": "true",
        "TRITON_GPU_COUNT": "2",
        "TRITON_STOP_TIMEOUT_S": "90",
    }
    # The entrypoint appends the container command to the flags it derives.
    assert c["command"] == ["--cuda-memory-pool-byte-size=0:1024", "--cuda-memory-pool-byte-size=1:1024", "--log-verbose=1"]
    assert "command" not in triton(render(module_params()))


def test_cpu_only_does_not_require_a_gpu_at_start():
    assert env(triton(render(module_params(gpu_count=0))))["TRITON_REQUIRE_GPU"] == "false"


def test_user_environment_wins_over_rendered_variables():
    c = triton(render(module_params(environment={"TRITON_LOAD_MODELS": "override", "EXTRA": "1"})))
    assert env(c)["TRITON_LOAD_MODELS"] == "override"
    assert env(c)["EXTRA"] == "1"
    assert [e["name"] for e in c["environment"]] == sorted(e["name"] for e in c["environment"])


def test_model_repository_host_path_is_mounted_read_only_at_models():
    td = render(module_params(triton={"model_repository_host_path": "/mnt/nvme/models"}))
    assert td["volumes"] == [{"name": "model-repository", "host": {"sourcePath": "/mnt/nvme/models"}}]
    assert triton(td)["mountPoints"] == [{"sourceVolume": "model-repository", "containerPath": "/models", "readOnly": True}]
    assert "volumes" not in render(module_params())


def test_health_check_defaults_to_the_deep_check_with_a_model_loading_start_period():
    health = triton(render(module_params()))["healthCheck"]
    assert health["command"] == ["CMD", "/opt/inferops/bin/triton_healthcheck.py"]
    assert (health["interval"], health["timeout"], health["retries"]) == (30, 5, 3)
    assert health["startPeriod"] == 180
    assert "healthCheck" not in triton(render(module_params(health_check={"enabled": False})))


def test_default_logging_is_awslogs_per_family_and_can_be_replaced_or_dropped():
    log = triton(render(module_params(family="fam"), "eu-west-1"))["logConfiguration"]
    assert log == {
        "logDriver": "awslogs",
        "options": {"awslogs-group": "/ecs/fam", "awslogs-stream-prefix": "triton", "awslogs-region": "eu-west-1"},
    }
    custom = {"logDriver": "json-file", "options": {"max-size": "10m"}}
    assert triton(render(module_params(log_configuration=custom)))["logConfiguration"] == custom
    assert "logConfiguration" not in triton(render(module_params(log_configuration={})))


def test_environment_secrets_roles_tags_constraints():
    td = render(
        module_params(
            environment={"B": 2, "A": "x"},
            secrets={"HF_TOKEN": SSM_ARN},
            execution_role_arn=ROLE,
            task_role_arn="arn:aws:iam::123456789012:role/task",
            tags={"team": "ml"},
            placement_constraints=[{"type": "distinctInstance", "expression": None}],
        )
    )
    c = triton(td)
    assert c["environment"][:2] == [{"name": "A", "value": "x"}, {"name": "B", "value": "2"}]
    assert c["secrets"] == [{"name": "HF_TOKEN", "valueFrom": SSM_ARN}]
    assert td["executionRoleArn"] == ROLE
    assert td["taskRoleArn"].endswith(":role/task")
    assert td["tags"] == [{"key": "team", "value": "ml"}]
    assert td["placementConstraints"] == [{"type": "distinctInstance"}]


def test_container_overrides_deep_merge_and_extra_containers():
    sidecar = {"name": "otel", "image": "otel@sha256:" + "c" * 64, "essential": False, "memoryReservation": 64}
    td = render(
        module_params(
            container_overrides={"linuxParameters": {"sharedMemorySize": 4096}, "user": "1000", "dockerLabels": {"a": "b"}},
            extra_containers=[sidecar],
        )
    )
    c = triton(td)
    assert c["linuxParameters"] == {"initProcessEnabled": True, "sharedMemorySize": 4096}
    assert c["user"] == "1000"
    assert c["dockerLabels"] == {"a": "b"}
    assert td["containerDefinitions"][1] == sidecar


def test_render_does_not_modify_its_input():
    params = module_params(container_overrides={"linuxParameters": {"sharedMemorySize": 1}})
    render(params)
    render(params)
    assert params["container_overrides"] == {"linuxParameters": {"sharedMemorySize": 1}}


def test_a_task_definition_carries_its_release_and_serves_the_agent_s_view_of_it():
    bound = env(triton(render(module_params(triton={"model_repository_host_path": "/mnt/models", "release_id": "r-0a1b2c3d4e5f"}))))
    assert bound["INFEROPS_RELEASE_ID"] == "r-0a1b2c3d4e5f"
    assert bound["INFEROPS_MODEL_VIEW"] == "task-definition"
    push = env(triton(render(module_params(triton={"model_repository_host_path": "/mnt/models", "model_view": False}))))
    assert "INFEROPS_MODEL_VIEW" not in push and "INFEROPS_RELEASE_ID" not in push  # no agent, no release record
    baked = env(triton(render(module_params(triton={}))))
    assert "INFEROPS_MODEL_VIEW" not in baked  # models in the image: no host path, no view


def test_a_metrics_target_dir_is_a_task_volume_the_entrypoint_writes_the_sidecar_target_to():
    td = render(module_params(triton={"model_repository_host_path": "/mnt/models", "metrics_target_dir": "/inferops/metrics/"}))
    assert {"name": "metrics-targets"} in td["volumes"]  # no host path: a volume of the task, shared by its containers
    assert {"sourceVolume": "metrics-targets", "containerPath": "/inferops/metrics", "readOnly": False} in triton(td)["mountPoints"]
    assert {"sourceVolume": "model-repository", "containerPath": "/models", "readOnly": True} in triton(td)["mountPoints"]
    assert env(triton(td))["INFEROPS_METRICS_TARGET_FILE"] == "/inferops/metrics/triton.json"
    plain = render(module_params(triton={}))
    assert "INFEROPS_METRICS_TARGET_FILE" not in env(triton(plain)) and "volumes" not in plain


def test_the_fleet_architecture_becomes_the_runtime_platform():
    assert render(module_params(cpu_architecture="ARM64"))["runtimePlatform"] == {
        "cpuArchitecture": "ARM64",
        "operatingSystemFamily": "LINUX",
    }
    assert render(module_params(cpu_architecture="X86_64"))["runtimePlatform"]["cpuArchitecture"] == "X86_64"
    # Not given: no runtimePlatform, so an existing family gets no new revision from this option.
    assert "runtimePlatform" not in render(module_params())
