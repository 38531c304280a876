"""The GPU count per instance type that gpu_health caches in the AMI agrees with EC2's DescribeInstanceTypes data.

The reference is the DescribeInstanceTypes snapshot moto ships (moto/ec2/resources/instance_types.json.gz, recorded
from AWS). p3 (2xlarge, 8xlarge, 16xlarge) is missing from that snapshot; its counts are checked against AWS's
published sizes below.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import moto
import yaml

ROLE_DEFAULTS = Path(__file__).resolve().parents[2] / "roles" / "gpu_health" / "defaults" / "main.yml"
ENTRIES = yaml.safe_load(ROLE_DEFAULTS.read_text())["gpu_health_instance_type_gpus"]
TABLE = {name: entry["gpus"] for name, entry in ENTRIES.items()}
FAMILIES = {"g4dn", "g5", "g5g", "g6", "g6e", "g6f", "gr6f", "p3", "p3dn", "p4d", "p4de", "p5", "p5e", "p5en", "p6-b200", "p6-b300"}


def ec2_gpu_counts() -> dict[str, int]:
    path = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    types = json.loads(gzip.decompress(path.read_bytes()))
    return {name: sum(g["Count"] for g in info.get("GpuInfo", {}).get("Gpus", [])) for name, info in types.items()}


def test_every_size_of_the_supported_families_is_in_the_table():
    ec2 = ec2_gpu_counts()
    sizes = {name for name in ec2 if name.split(".")[0] in FAMILIES}
    assert sizes - set(TABLE) == set()
    assert {name.split(".")[0] for name in TABLE} == FAMILIES


def test_the_table_agrees_with_describe_instance_types():
    ec2 = ec2_gpu_counts()
    disagreeing = {name: (count, ec2[name]) for name, count in TABLE.items() if name in ec2 and ec2[name] != count}
    assert disagreeing == {}


def test_sizes_missing_from_the_snapshot():
    ec2 = ec2_gpu_counts()
    assert {name for name in TABLE if name not in ec2} == {"p3.2xlarge", "p3.8xlarge", "p3.16xlarge"}
    assert (TABLE["p3.2xlarge"], TABLE["p3.8xlarge"], TABLE["p3.16xlarge"]) == (1, 4, 8)
    # The sizes the issue names.
    assert [TABLE[f"g5.{s}"] for s in ("xlarge", "2xlarge", "4xlarge", "8xlarge", "16xlarge", "12xlarge", "24xlarge", "48xlarge")] == [
        1,
        1,
        1,
        1,
        1,
        4,
        4,
        8,
    ]


def test_fractional_gpus_are_the_grid_flavour_and_every_other_type_the_datacenter_one():
    path = Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz"
    types = json.loads(gzip.decompress(path.read_bytes()))
    fractional = {
        name
        for name, info in types.items()
        if name in ENTRIES and any(g.get("GpuPartitionSize", 1.0) < 1.0 for g in info.get("GpuInfo", {}).get("Gpus", []))
    }
    assert fractional == {"g6f.large", "g6f.xlarge", "g6f.2xlarge", "g6f.4xlarge", "gr6f.4xlarge"}
    assert {name for name, entry in ENTRIES.items() if entry.get("flavour", "tesla") == "grid"} == fractional
    assert {entry.get("flavour", "tesla") for entry in ENTRIES.values()} == {"tesla", "grid"}
