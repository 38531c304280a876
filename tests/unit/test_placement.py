"""Placement verdicts of the cutover's capacity phase over instance mixes (pure functions, no stand-in needed).

A task needing N GPUs fits only on ONE instance with N free GPUs and enough CPU and memory; managed scaling adds at
most (max size - current) instances of the launch template's type.
"""

from __future__ import annotations

from ansible_collections.inferops.triton_ecs.plugins.module_utils._bluegreen import placement as pl

R = pl.Resources


def gpu_instances(*free_gpus: int, cpu: int = 16384, memory: int = 65536) -> dict[str, pl.Resources]:
    return {f"i-{n}": R(g, cpu, memory) for n, g in enumerate(free_gpus)}


def group(max_size: int, current: int, gpus: int = 1, instance_type: str = "g5.xlarge") -> pl.Headroom:
    return pl.Headroom("gpu", instance_type, max_size, current, R(gpus, 4 * 1024, int(16384 * pl.NEW_INSTANCE_MEMORY_SHARE)))


def test_one_eight_gpu_instance_takes_four_two_gpu_tasks():
    verdict = pl.verdict(R(2, 1024, 8192), 4, gpu_instances(8), [], "c")
    assert verdict.ok and verdict.on_registered == 4 and verdict.per_instance == {"i-0": 4}


def test_eight_one_gpu_instances_take_no_two_gpu_task():
    """8 free GPUs in the cluster, but no instance has 2: the old sum-of-GPUs check said yes."""
    verdict = pl.verdict(R(2, 1024, 8192), 1, gpu_instances(*[1] * 8), [], "c")
    assert not verdict.ok and verdict.on_registered == 0
    assert "GPU 1 free of 2 needed" in verdict.why
    assert "no capacity provider with managed scaling" in verdict.why and "lower desired_count to 0" in verdict.why


def test_eight_one_gpu_instances_take_eight_one_gpu_tasks():
    assert pl.verdict(R(1, 1024, 8192), 8, gpu_instances(*[1] * 8), [], "c").ok


def test_fragmented_cluster_places_only_whole_tasks():
    """3 + 1 + 2 free GPUs: 2-GPU tasks fit once on the 3, not on the 1, once on the 2."""
    instances = gpu_instances(3, 1, 2)
    assert pl.place(R(2, 0, 0), 5, instances) == {"i-0": 1, "i-2": 1}
    verdict = pl.verdict(R(2, 0, 0), 3, instances, [], "c")
    assert not verdict.ok and verdict.on_registered == 2 and "1 cannot be placed" in verdict.why


def test_cpu_or_memory_can_be_what_runs_out():
    instances = {"i-0": R(4, 2048, 65536), "i-1": R(4, 16384, 4000)}
    verdict = pl.verdict(R(1, 2048, 8192), 2, instances, [], "c")
    assert verdict.on_registered == 1 and not verdict.ok
    assert "MEMORY 4000 free of 8192 needed" in verdict.why


def test_auto_scaling_group_headroom_counts_instances_it_can_still_add():
    verdict = pl.verdict(R(1, 1024, 8192), 3, gpu_instances(1), [group(max_size=4, current=2)], "c")
    assert verdict.ok and verdict.on_registered == 1 and verdict.on_new == 2
    assert "at 2 of max 4 can add 2 g5.xlarge" in verdict.why


def test_auto_scaling_group_at_max_adds_nothing_and_says_how_far_to_raise_it():
    verdict = pl.verdict(R(1, 1024, 8192), 3, gpu_instances(1), [group(max_size=4, current=4)], "c")
    assert not verdict.ok and verdict.on_new == 0
    assert "raise the max size of Auto Scaling group gpu to at least 6" in verdict.why
    assert "lower desired_count to 1" in verdict.why


def test_instance_type_with_too_few_gpus_cannot_help_however_large_the_group():
    verdict = pl.verdict(R(4, 1024, 8192), 1, {}, [group(max_size=100, current=0, gpus=1)], "c")
    assert not verdict.ok and "one g5.xlarge of Auto Scaling group gpu cannot hold one task (GPU 1 free of 4 needed)" in verdict.why
    assert "lower the task's GPU count or use a larger instance type" in verdict.why


def test_a_task_whose_memory_exceeds_the_instance_type_is_blamed_on_memory_not_gpus():
    """inventories/example once asked 24000 MiB reserved on g5.xlarge (16 GiB of RAM; the 24 GiB are the GPU's)."""
    verdict = pl.verdict(R(1, 0, 24000), 2, {}, [group(max_size=8, current=0)], "inference")
    assert not verdict.ok
    assert "(MEMORY 15564 free of 24000 needed): lower the task's memory reservation (memory_reservation, MiB)" in verdict.why
    assert "GPUs" not in verdict.why


def test_ecs_places_by_the_memory_reservation_not_the_hard_limit():
    td = {"containerDefinitions": [{"memory": 16000, "memoryReservation": 12000, "resourceRequirements": [{"type": "GPU", "value": "1"}]}]}
    assert pl.task_needs(td) == R(1, 0, 12000)
    assert pl.verdict(pl.task_needs(td), 2, {}, [group(max_size=2, current=0)], "c").ok


def test_nothing_needed_is_always_ok():
    assert pl.verdict(R(1, 0, 0), 0, {}, [], "c").ok


def test_reading_aws_shapes():
    td = {
        "containerDefinitions": [
            {"memory": 30000, "cpu": 4096, "resourceRequirements": [{"type": "GPU", "value": "2"}]},
            {"memoryReservation": 128, "cpu": 0},
        ]
    }
    assert pl.task_needs(td) == R(2, 4096, 30128)
    assert pl.task_needs({**td, "cpu": "8192", "memory": "32768"}) == R(2, 8192, 32768)
    instances = [
        {
            "ec2InstanceId": "i-a",
            "status": "ACTIVE",
            "remainingResources": [
                {"name": "GPU", "type": "STRINGSET", "stringSetValue": ["GPU-1", "GPU-2"]},
                {"name": "CPU", "type": "INTEGER", "integerValue": 2048},
                {"name": "MEMORY", "type": "INTEGER", "integerValue": 15000},
            ],
        },
        {"ec2InstanceId": "i-b", "status": "DRAINING", "remainingResources": []},
        {"ec2InstanceId": "i-c", "status": "ACTIVE", "agentConnected": False, "remainingResources": []},
    ]
    assert pl.usable_instances(instances) == {"i-a": R(2, 2048, 15000)}
    p4d = {
        "InstanceType": "p4d.24xlarge",
        "GpuInfo": {"Gpus": [{"Count": 8}]},
        "VCpuInfo": {"DefaultVCpus": 96},
        "MemoryInfo": {"SizeInMiB": 1179648},
    }
    assert pl.instance_type_resources(p4d).gpus == 8 and pl.instance_type_resources(p4d).cpu == 96 * 1024
    mixed = {
        "MixedInstancesPolicy": {
            "LaunchTemplate": {
                "LaunchTemplateSpecification": {"LaunchTemplateName": "gpu", "Version": "$Latest"},
                "Overrides": [{"InstanceType": "g5.xlarge"}, {"InstanceType": "g5.2xlarge"}],
            }
        },
        "DesiredCapacity": 1,
        "Instances": [{}, {}],
    }
    assert pl.group_launch_template(mixed) == ({"LaunchTemplateName": "gpu", "Version": "$Latest"}, ["g5.xlarge", "g5.2xlarge"])
    assert pl.group_current_size(mixed) == 2
