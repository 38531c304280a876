#!/usr/bin/python
# Copyright: contributors to inferops.triton_ecs
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: task_definition
short_description: Register an ECS task definition for a GPU Triton container, without phantom revisions
version_added: 0.1.0
description:
  - Renders an ECS task definition for NVIDIA Triton Inference Server on EC2 GPU container instances
    from a few high-level options, and registers a new revision only when it differs from the latest
    ACTIVE revision of the family.
  - The comparison uses a canonical form of both sides (read-only fields stripped, the defaults AWS
    fills filled in, order-free lists sorted), so re-applying the same options never
    registers a phantom revision. A run with nothing to change makes one ECS read call (two with
    O(resolve_image_digest)), whatever the number of revisions in the family.
  - All input is validated before the first AWS call; each error names the field, the value and the fix.
  - O(tags) do not make a revision. When only they differ, the latest ACTIVE revision is tagged in place
    (C(TagResource)/C(UntagResource)); a new revision is registered with the converged tags. With O(tags) omitted the
    revision's tags are left alone and carried to a new revision.
author:
  - inferops maintainers (@inferops)
options:
  family:
    description: Task definition family.
    type: str
    required: true
  state:
    description:
      - V(present) registers a new revision when the rendered definition differs from the latest ACTIVE one.
      - V(absent) deregisters every ACTIVE revision of the family; it fails, before any write, when a service still uses one.
    type: str
    choices: [present, absent]
    default: present
  image:
    description:
      - Triton image as a digest reference C(repository@sha256:<digest>). Required with O(state=present).
      - A tag is accepted only with O(resolve_image_digest=true); C(:latest) and untagged references are refused.
    type: str
  resolve_image_digest:
    description:
      - Resolve a tagged ECR image reference to its digest through ECR C(DescribeImages), and register the digest.
    type: bool
    default: false
  allowed_image_tags:
    description:
      - Tags accepted without a digest, in O(image), O(container_overrides) and O(extra_containers) alike, for
        images whose tag never moves (for example the local rehearsal's sidecar). C(latest) is never accepted.
      - Every other image of the task must be a digest reference C(repository@sha256:<digest>).
    type: list
    elements: str
    default: []
  gpu_count:
    description: GPUs per task (a C(GPU) resource requirement). V(0) renders a CPU-only task.
    type: int
    default: 1
  cpu:
    description: CPU units reserved for the Triton container (1024 is one vCPU). Unset means 0, as in ECS.
    type: int
  memory:
    description: Hard memory limit of the Triton container in MiB. O(memory) or O(memory_reservation) is required.
    type: int
  memory_reservation:
    description: Soft memory limit (reservation) of the Triton container in MiB; at most O(memory).
    type: int
  network_mode:
    description: Docker network mode of the task; one of V(awsvpc), V(bridge), V(host), V(none).
    type: str
    default: awsvpc
  cpu_architecture:
    description:
      - The CPU architecture of the fleet's instances, rendered as C(runtimePlatform.cpuArchitecture) (with
        C(operatingSystemFamily) V(LINUX)), so ECS places the task only on instances of that architecture and an
        arm64 fleet (g5g) is never sent an amd64-only task.
      - Role C(fleet_capacity) publishes it as C(fleet_capacity_cpu_architecture); M(inferops.triton_ecs.image_platforms)
        checks that the image's manifest carries it.
      - Omitted, the task definition has no C(runtimePlatform) (ECS then places it on any architecture).
    type: str
    choices: [X86_64, ARM64]
  triton:
    description:
      - How tritonserver is started inside the container. The image's entrypoint (role C(triton_image)) builds the
        tritonserver command from the C(TRITON_*) environment variables rendered from these options, and appends the
        container command (the flags of O(triton.pinned_memory_pool_bytes), O(triton.cuda_memory_pool_bytes) and
        O(triton.extra_args)).
    type: dict
    default: {}
    suboptions:
      models:
        description: Models to load at start (C(--load-model)); needs O(triton.model_control_mode=explicit).
        type: list
        elements: str
        default: []
      model_repository:
        description: Model repository path inside the container.
        type: str
        default: /models
      model_repository_host_path:
        description:
          - Directory on the container instance (for example local NVMe) mounted read-only at O(triton.model_repository).
          - Unset means the repository is inside the image.
          - The host's root and system paths (C(/proc), C(/sys), C(/dev), C(/etc), C(/run), C(/var/run), C(/usr),
            C(/var/lib/docker), C(/var/lib/ecs), ...) are refused, however the path is written.
        type: str
      model_view:
        description:
          - With O(triton.model_repository_host_path), the task serves the model agent's view of its own release
            (C(<repository>/.task-definitions/<family>-<revision>/), rendered as C(INFEROPS_MODEL_VIEW=task-definition)).
            It loads at start exactly the model versions of the release bound to this revision, whatever else the
            instance holds. Set V(false) for a fleet without the model agent (push delivery).
        type: bool
        default: true
      release_id:
        description:
          - The release this task definition runs, rendered as C(INFEROPS_RELEASE_ID), the id that
            C(model_release state=resolved) derives from the image and the models. A new release therefore registers a
            new revision, which the blue/green cutover brings up, even when only the models changed.
        type: str
      metrics_target_dir:
        description:
          - A directory on a task volume (C(metrics-targets)) mounted read-write in the Triton container, where the image's
            entrypoint writes the metrics sidecar's scrape target with the task's service and colour, read from the task
            metadata endpoint (C(INFEROPS_METRICS_TARGET_FILE=<dir>/triton.json)). A sidecar in O(extra_containers)
            mounts C(sourceVolume=metrics-targets) read-only at the same path (deploy.yml's metrics sidecar does).
          - Unset renders neither the volume nor the variable.
        type: str
      model_control_mode:
        description:
          - Triton model control mode. V(explicit) is the production choice; V(poll) can see partial copies.
          - Only V(explicit) with a release (O(triton.release_id), or the model view of
            O(triton.model_repository_host_path)) - another mode would load around the staged release and its rollback.
        type: str
        default: explicit
      exit_timeout_s:
        description: Seconds tritonserver finishes in-flight requests after SIGTERM (C(--exit-timeout-secs)).
        type: int
        default: 30
      drain_timeout_s:
        description:
          - Seconds the image's entrypoint waits on SIGTERM for Triton to go quiet before it unloads the models
            and forwards SIGTERM (C(TRITON_DRAIN_TIMEOUT_S)).
        type: int
        default: 30
      http_port:
        description: HTTP port.
        type: int
        default: 8000
      grpc_port:
        description: gRPC port.
        type: int
        default: 8001
      metrics_port:
        description: Prometheus metrics port.
        type: int
        default: 8002
      shared_memory_size_mib:
        description: Size of C(/dev/shm) in MiB (C(linuxParameters.sharedMemorySize)); the python backend needs it.
        type: int
        default: 1024
      pinned_memory_pool_bytes:
        description: C(--pinned-memory-pool-byte-size). Unset keeps Triton's default.
        type: int
      cuda_memory_pool_bytes:
        description: C(--cuda-memory-pool-byte-size) for every GPU of the task. Unset keeps Triton's default.
        type: int
      extra_args:
        description:
          - Further tritonserver arguments, appended as given.
          - A flag the image's entrypoint renders from these options (C(--model-repository), C(--model-store),
            C(--model-control-mode), C(--repository-poll-secs), C(--load-model), the three ports,
            C(--exit-timeout-secs)) is refused, here, in C(container_overrides.command) and in a C(TRITON_EXTRA_ARGS)
            variable - it would override what a staged release depends on; set the option instead.
        type: list
        elements: str
        default: []
  health_check:
    description: Container health check. The default runs the image's deep health check script.
    type: dict
    default: {}
    suboptions:
      enabled:
        description: Render a health check at all.
        type: bool
        default: true
      command:
        description: Health check command, starting with C(CMD) or C(CMD-SHELL).
        type: list
        elements: str
        default: [CMD, /opt/inferops/bin/triton_healthcheck.py]
      interval_s:
        description: Seconds between checks (5-300).
        type: int
        default: 30
      timeout_s:
        description: Seconds before a check fails (2-60).
        type: int
        default: 5
      retries:
        description: Failed checks before the container is unhealthy (1-10).
        type: int
        default: 3
      start_period_s:
        description: Grace period for model loading, during which failures do not count (0-300).
        type: int
        default: 180
  stop_timeout_s:
    description:
      - Seconds ECS waits after SIGTERM before SIGKILL (C(stopTimeout)).
      - Must cover the stop sequence, O(triton.drain_timeout_s) + 15 s model unload + O(triton.exit_timeout_s) + 5 s,
        and be at most 120 s (the EC2 maximum; C(ECS_CONTAINER_STOP_TIMEOUT) on the instances must allow it too).
    type: int
    default: 90
  log_configuration:
    description:
      - Container C(logConfiguration) as ECS takes it.
      - Unset renders C(awslogs) to the group C(/ecs/<family>) in the module's region; V({}) renders none.
    type: dict
  environment:
    description:
      - Plain environment variables of the Triton container. They win over the rendered C(TRITON_*) variables.
      - A name that says secret (C(PASSWORD), C(TOKEN), C(SECRET), C(KEY), ...) draws a warning, here and in every
        container, because its value would be stored in clear; use O(secrets).
      - A value that looks like a credential whatever the name (an AWS access key id or secret access key, a private
        key, a URL with a password, a Hugging Face, GitHub, Slack or OpenAI-style token) is refused, the value not
        shown; use O(secrets) (for AWS credentials, O(task_role_arn)).
    type: dict
    default: {}
  secrets:
    description:
      - Environment variables read from SSM Parameter Store or Secrets Manager at task start, as name to ARN.
      - Plain values are refused; they would be stored in the task definition in clear.
    type: dict
    default: {}
  execution_role_arn:
    description: Role the ECS agent uses to pull the image, write logs and read O(secrets).
    type: str
  task_role_arn:
    description: Role the containers use for AWS calls.
    type: str
  container_overrides:
    description:
      - Deep-merged into the rendered Triton container definition, for anything this module does not model.
      - Lists of keyed entries (C(environment), C(secrets), C(portMappings), C(mountPoints), C(ulimits),
        C(resourceRequirements)) merge entry by entry, so an override never drops the rendered C(TRITON_*)
        settings. C(command) is refused when the C(triton) options render flags; use O(triton.extra_args).
      - The merged container obeys the same rules as the options (image digest or O(allowed_image_tags), secrets
        as C(valueFrom) ARNs only, the stop budget).
      - Refused in it and in every sidecar - C(privileged), added C(linuxParameters.capabilities), C(user) root (C(root),
        C(0), C(0:<group>)), an C(unconfined) C(dockerSecurityOptions) entry; a C(TRITON_MODEL_CONTROL_MODE) variable
        that differs from O(triton.model_control_mode).
    type: dict
    default: {}
  extra_containers:
    description:
      - Further container definitions (sidecars), as ECS takes them, under the same rules as the Triton container
        (image digest or O(allowed_image_tags), secrets as C(valueFrom) ARNs only, names and numbers AWS accepts).
    type: list
    elements: dict
    default: []
  keep_revisions:
    description:
      - Keep at most this many ACTIVE revisions of the family, deregistering the oldest ones that no service uses.
      - Unset keeps every revision. When set, every run lists the family's revisions, and the services when some are beyond the limit.
    type: int
attributes:
  check_mode:
    details:
      - Registers, tags and deregisters nothing, and returns the rendered definition and the diff.
  diff_mode:
    details:
      - The diff is the canonical form of the latest ACTIVE revision (before) and of the rendered definition (after), tags included.
notes:
  - The Triton container is named C(triton). It expects the image built by the C(triton_image) role, whose entrypoint
    reads the C(TRITON_*) variables; for another image, set C(entryPoint) and C(command) through O(container_overrides).
extends_documentation_fragment:
  - inferops.triton_ecs.placement_constraints
  - inferops.triton_ecs.attributes.full
  - amazon.aws.tags
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
"""

EXAMPLES = r"""
- name: Register the Triton task definition
  inferops.triton_ecs.task_definition:
    family: triton
    image: 123456789012.dkr.ecr.us-east-1.amazonaws.com/triton@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
    gpu_count: 1
    memory: 30000
    memory_reservation: 28000
    triton:
      models: [resnet50, bert]
      model_repository_host_path: /mnt/nvme/models
      exit_timeout_s: 30
    stop_timeout_s: 90
    execution_role_arn: arn:aws:iam::123456789012:role/ecsTaskExecutionRole
    secrets:
      HF_TOKEN: arn:aws:ssm:us-east-1:123456789012:parameter/triton/hf_token
    tags:
      service: triton
    keep_revisions: 10
  register: triton_task

- name: Resolve an ECR tag to its digest and register that digest
  inferops.triton_ecs.task_definition:
    family: triton
    image: 123456789012.dkr.ecr.us-east-1.amazonaws.com/triton:24.08-py3
    resolve_image_digest: true
    memory: 30000

- name: Deregister every revision of a family
  inferops.triton_ecs.task_definition:
    family: triton-canary
    state: absent
"""

RETURN = r"""
task_definition_arn:
  description: ARN of the revision that matches the options (registered now or found); null in check mode when one would be registered.
  returned: state=present
  type: str
  sample: arn:aws:ecs:us-east-1:123456789012:task-definition/triton:7
revision:
  description: Revision number of RV(task_definition_arn).
  returned: state=present
  type: int
  sample: 7
task_definition:
  description: The rendered task definition in canonical form (what is registered, tags included).
  returned: always
  type: dict
  sample: {"family": "triton", "networkMode": "awsvpc", "containerDefinitions": [{"name": "triton"}]}
diff:
  description: Canonical forms of the latest ACTIVE revision (before) and of the rendered definition (after).
  returned: always
  type: dict
  sample: {"before": {}, "after": {"family": "triton"}}
changed_fields:
  description: Dotted paths of the fields that differ between before and after.
  returned: always
  type: list
  elements: str
  sample: ["containerDefinitions[triton].image"]
image:
  description: The image reference rendered, after any digest resolution.
  returned: state=present
  type: str
  sample: 123456789012.dkr.ecr.us-east-1.amazonaws.com/triton@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
actions:
  description: What the module did (or would do in check mode), one line each.
  returned: always
  type: list
  elements: str
  sample: ["registered triton:7", "tagged triton:7: team", "deregistered triton:1"]
tags:
  description: Tags of RV(task_definition_arn) (in check mode, as they would be).
  returned: state=present
  type: dict
  sample: {team: inference}
kept_in_use:
  description: Revisions beyond O(keep_revisions) kept because a service uses them, as ARN to services.
  returned: when keep_revisions is set
  type: dict
  sample: {"arn:aws:ecs:us-east-1:123456789012:task-definition/triton:2": ["prod/triton-blue"]}
"""

# Ansible modules keep their imports below the documentation strings.
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.errors import module_errors  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._aws.module import aws_module, client  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._tags import TAGS_OPTIONS  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.plan import absent, present  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.secrets import values_to_hide  # noqa: E402
from ansible_collections.inferops.triton_ecs.plugins.module_utils._task_definition.validate import validate  # noqa: E402


def main() -> None:
    argument_spec = dict(
        family=dict(type="str", required=True),
        state=dict(type="str", choices=["present", "absent"], default="present"),
        image=dict(type="str"),
        resolve_image_digest=dict(type="bool", default=False),
        allowed_image_tags=dict(type="list", elements="str", default=[]),
        gpu_count=dict(type="int", default=1),
        cpu=dict(type="int"),
        memory=dict(type="int"),
        memory_reservation=dict(type="int"),
        network_mode=dict(type="str", default="awsvpc"),
        cpu_architecture=dict(type="str", choices=["X86_64", "ARM64"]),
        triton=dict(
            type="dict",
            default={},
            options=dict(
                models=dict(type="list", elements="str", default=[]),
                model_repository=dict(type="str", default="/models"),
                model_repository_host_path=dict(type="str"),
                model_view=dict(type="bool", default=True),
                release_id=dict(type="str"),
                metrics_target_dir=dict(type="str"),
                model_control_mode=dict(type="str", default="explicit"),
                exit_timeout_s=dict(type="int", default=30),
                drain_timeout_s=dict(type="int", default=30),
                http_port=dict(type="int", default=8000),
                grpc_port=dict(type="int", default=8001),
                metrics_port=dict(type="int", default=8002),
                shared_memory_size_mib=dict(type="int", default=1024),
                pinned_memory_pool_bytes=dict(type="int"),
                cuda_memory_pool_bytes=dict(type="int"),
                extra_args=dict(type="list", elements="str", default=[]),
            ),
        ),
        health_check=dict(
            type="dict",
            default={},
            options=dict(
                enabled=dict(type="bool", default=True),
                command=dict(type="list", elements="str", default=["CMD", "/opt/inferops/bin/triton_healthcheck.py"]),
                interval_s=dict(type="int", default=30),
                timeout_s=dict(type="int", default=5),
                retries=dict(type="int", default=3),
                start_period_s=dict(type="int", default=180),
            ),
        ),
        stop_timeout_s=dict(type="int", default=90),
        log_configuration=dict(type="dict"),
        environment=dict(type="dict", default={}),
        # Values are ARNs of secrets (validated), so they may be logged; a refused plain value is hidden (values_to_hide).
        secrets=dict(type="dict", default={}, no_log=False),
        execution_role_arn=dict(type="str"),
        task_role_arn=dict(type="str"),
        placement_constraints=dict(
            type="list",
            elements="dict",
            default=[],
            options=dict(type=dict(type="str", required=True), expression=dict(type="str")),
        ),
        **TAGS_OPTIONS,
        container_overrides=dict(type="dict", default={}),
        extra_containers=dict(type="list", elements="dict", default=[]),
        keep_revisions=dict(type="int"),
    )
    module = aws_module(
        argument_spec,
        required_if=[("state", "present", ["image"])],
    )
    module.no_log_values.update(values_to_hide(module.params))
    with module_errors(module):
        warnings = validate(module.params)
    for warning in warnings:
        module.warn(warning)

    ecs = client(module, "ecs")
    with module_errors(module, f"ECS task definition family {module.params['family']}: AWS call failed"):
        if module.params["state"] == "present":
            result = present(
                ecs,
                lambda: client(module, "ecr"),
                module.params,
                module.region,
                check_mode=module.check_mode,
            )
        else:
            result = absent(ecs, module.params, check_mode=module.check_mode)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
