"""The Packer template, read with python-hcl2 (no packer binary here): structure, pins and security settings."""

from __future__ import annotations

import json
import re
from pathlib import Path

import hcl2
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
PACKER = REPO / "packer"


def unquote(value):
    """python-hcl2 keeps string literals quoted ('"x"') and expressions as '${...}'."""
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def load(name: str) -> dict:
    with (PACKER / name).open() as handle:
        return hcl2.load(handle)


@pytest.fixture(scope="module")
def template() -> dict:
    return load("gpu_ami.pkr.hcl")


@pytest.fixture(scope="module")
def variables() -> dict[str, dict]:
    blocks = load("variables.pkr.hcl")["variable"]
    return {unquote(name): body for block in blocks for name, body in block.items()}


@pytest.fixture(scope="module")
def locals_(template) -> dict:
    merged: dict = {}
    for block in template["locals"]:
        merged.update({k: v for k, v in block.items() if not k.startswith("__")})
    return merged


@pytest.fixture(scope="module")
def source(template) -> dict:
    (block,) = template["source"]
    assert list(block) == ['"amazon-ebs"']
    (body,) = block['"amazon-ebs"'].values()
    return body


@pytest.fixture(scope="module")
def provisioners(template) -> list[tuple[str, dict]]:
    (build,) = template["build"]
    return [(unquote(kind), body) for block in build["provisioner"] for kind, body in block.items()]


def documented_role_variables() -> set[str]:
    names: set[str] = set()
    for spec in REPO.glob("roles/*/meta/argument_specs.yml"):
        for entry in yaml.safe_load(spec.read_text())["argument_specs"].values():
            names.update(entry.get("options", {}))
    return names


def extra_var_names(locals_: dict) -> set[str]:
    """Keys of local.ansible_extra_vars: merge(local.pins, { key = ..., ... })."""
    expression = locals_["ansible_extra_vars"]
    match = re.fullmatch(r"\$\{merge\(local\.pins, \{(.*)\}\)\}", expression)
    assert match, f"ansible_extra_vars is not merge(local.pins, {{...}}): {expression}"
    return set(locals_["pins"]) | set(re.findall(r"(\w+)\s*=", match.group(1)))


def test_every_file_parses():
    for path in PACKER.glob("*.hcl"):
        with path.open() as handle:
            assert hcl2.load(handle), path


def test_plugins_are_pinned_to_exact_versions():
    (block,) = load("plugins.pkr.hcl")["packer"]
    (plugins,) = block["required_plugins"]
    plugins = {k: v for k, v in plugins.items() if not k.startswith("__")}
    assert set(plugins) == {"amazon", "ansible"}
    for name, plugin in plugins.items():
        assert re.fullmatch(r"= \d+\.\d+\.\d+", unquote(plugin["version"])), name
        assert unquote(plugin["source"]) == f"github.com/hashicorp/{name}"


def test_every_variable_is_typed_and_described(variables):
    assert variables
    for name, body in variables.items():
        assert body.get("type"), f"variable {name} has no type"
        assert len(unquote(body.get("description", ""))) > 20, f"variable {name} has no description"


def test_every_required_variable_is_pinned_in_the_release_file(variables):
    pins = {k: unquote(v) for k, v in load("release.auto.pkrvars.hcl").items() if not k.startswith("__")}
    required = {name for name, body in variables.items() if "default" not in body}
    assert required <= set(pins), f"no value for {sorted(required - set(pins))}"
    assert set(pins) <= set(variables), f"unknown variables pinned: {sorted(set(pins) - set(variables))}"
    assert re.fullmatch(r"\d+\.\d+\.\d+", pins["nvidia_driver_version"])


def evaluate(expression: str, variables: dict[str, str]) -> str:
    """The few HCL forms the template's per-architecture locals use, evaluated for the given variables.

    python-hcl2 parses but does not evaluate; this covers `var.x != "" ? var.x : E`, `lookup({k = "v"}, var.x, "")`
    and a string with `${var.x}`, and fails on anything else so a new form cannot pass unchecked.
    """
    body = expression[2:-1] if expression.startswith("${") and expression.endswith("}") else expression
    if match := re.fullmatch(r'var\.(\w+) != "" \? var\.\1 : (.+)', body):
        return variables[match[1]] or evaluate(match[2], variables)
    if match := re.fullmatch(r'lookup\(\{(.*)\}, var\.(\w+), ""\)', body):
        return dict(re.findall(r'(\w+) = "([^"]*)"', match[1])).get(variables[match[2]], "")
    if match := re.fullmatch(r'"([^"]*)"', body):
        return re.sub(r"\$\{var\.(\w+)\}", lambda m: variables[m[1]], match[1])
    raise AssertionError(f"the test cannot evaluate {expression}")


def defaults_for(variables: dict, architecture: str) -> dict[str, str]:
    values = {name: unquote(body.get("default", "")) for name, body in variables.items() if isinstance(body.get("default", ""), str)}
    return {**values, "architecture": architecture}


def test_source_ami_is_the_most_recent_al2023(source, variables, locals_):
    (ami_filter,) = source["source_ami_filter"]
    assert ami_filter["most_recent"] is True
    assert ami_filter["filters"]["name"] == "${local.source_ami_name_filter}"
    assert ami_filter["filters"]["architecture"] == "${var.architecture}"
    assert source["instance_type"] == "${local.instance_type}"
    assert evaluate(locals_["source_ami_name_filter"], defaults_for(variables, "x86_64")).startswith("al2023-ami-")


def test_the_architecture_variable_allows_x86_64_and_arm64_only(variables):
    architecture = variables["architecture"]
    assert unquote(architecture["default"]) == "x86_64"
    (validation,) = architecture["validation"]
    assert validation["condition"] == '${contains(["x86_64", "arm64"], var.architecture)}'


@pytest.mark.parametrize(
    ("architecture", "ami_suffix", "instance_type", "package_architecture"),
    [("x86_64", "-x86_64", "g4dn.xlarge", "x86_64"), ("arm64", "-arm64", "g5g.xlarge", "aarch64")],
)
def test_one_variable_selects_base_image_build_instance_and_packages(
    variables, locals_, architecture, ami_suffix, instance_type, package_architecture
):
    values = defaults_for(variables, architecture)
    assert evaluate(locals_["source_ami_name_filter"], values) == f"al2023-ami-2023.*-kernel-6.1{ami_suffix}"
    assert evaluate(locals_["instance_type"], values) == instance_type
    assert evaluate(locals_["package_architecture"], values) == package_architecture
    # An explicit instance type or name filter still wins.
    assert evaluate(locals_["instance_type"], {**values, "instance_type": "c7g.large"}) == "c7g.large"
    # The roles get the package architecture, which nvidia_driver accepts.
    assert "nvidia_driver_architecture = local.package_architecture" in locals_["ansible_extra_vars"]
    spec = yaml.safe_load((REPO / "roles" / "nvidia_driver" / "meta" / "argument_specs.yml").read_text())
    assert package_architecture in spec["argument_specs"]["main"]["options"]["nvidia_driver_architecture"]["choices"]


@pytest.mark.parametrize("architecture", ["x86_64", "arm64"])
def test_the_default_build_instance_runs_the_architecture(variables, locals_, architecture):
    """Checked against EC2's DescribeInstanceTypes data as moto ships it (recorded from AWS)."""
    import gzip

    import moto

    types = json.loads(gzip.decompress((Path(moto.__file__).parent / "ec2" / "resources" / "instance_types.json.gz").read_bytes()))
    instance_type = evaluate(locals_["instance_type"], defaults_for(variables, architecture))
    assert architecture in types[instance_type]["ProcessorInfo"]["SupportedArchitectures"]


def test_imdsv2_is_required(source):
    (metadata,) = source["metadata_options"]
    assert unquote(metadata["http_tokens"]) == "required"
    assert unquote(source["imds_support"]) == "v2.0"


def test_root_volume_and_ami_are_encrypted_gp3(source):
    (root,) = source["launch_block_device_mappings"]
    assert root["encrypted"] is True
    assert unquote(root["volume_type"]) == "gp3"
    assert source["encrypt_boot"] is True


def test_no_ssh_ingress_from_anywhere(source, variables):
    assert unquote(source["ssh_interface"]) == "session_manager"
    assert source["temporary_security_group_source_cidrs"] == "${var.build_ingress_cidrs}"
    default = [unquote(c) for c in variables["build_ingress_cidrs"]["default"]]
    assert "0.0.0.0/0" not in default and "::/0" not in default
    for path in PACKER.glob("*.hcl"):
        for cidr in ("0.0.0.0/0", "::/0"):
            # Only the validation that rejects them may mention them.
            mentions = [line for line in path.read_text().splitlines() if cidr in line and "contains(var.build_ingress_cidrs" not in line]
            assert not mentions, (path.name, mentions)


def test_the_kernel_is_final_before_the_driver_is_built(provisioners):
    kinds = [kind for kind, _body in provisioners]
    assert kinds[-1] == "ansible"
    reboot = next(
        i for i, (kind, body) in enumerate(provisioners) if kind == "shell" and any("reboot" in line for line in body.get("inline", []))
    )
    assert provisioners[reboot][1]["expect_disconnect"] is True
    assert reboot < kinds.index("ansible")
    after_reboot = provisioners[reboot + 1][1]
    assert any("uname -r" in line for line in after_reboot["inline"]), "check that the newest kernel is running"


def test_the_ansible_provisioner_runs_an_existing_playbook(provisioners):
    (ansible,) = [body for kind, body in provisioners if kind == "ansible"]
    playbook = unquote(ansible["playbook_file"]).replace("${path.root}", str(PACKER))
    assert Path(playbook).resolve() == REPO / "playbooks" / "build_ami.yml"
    assert Path(playbook).is_file()
    assert ansible["extra_arguments"] == ['"--extra-vars"', "${jsonencode(local.ansible_extra_vars)}"]


def test_every_extra_var_is_a_documented_role_variable(locals_):
    names = extra_var_names(locals_)
    assert "nvidia_driver_version" in names
    undocumented = names - documented_role_variables()
    assert not undocumented, f"passed to the playbook but no role documents them: {sorted(undocumented)}"


def test_every_pin_is_a_tag_and_in_the_manifest(template, locals_, source):
    pins = set(locals_["pins"])
    variables_pinned = {k for k, v in load("release.auto.pkrvars.hcl").items() if not k.startswith("__")}
    assert variables_pinned <= pins, f"pinned but not tagged: {sorted(variables_pinned - pins)}"
    assert "local.ami_facts" in locals_["tags"]
    assert locals_["ami_facts"].startswith("${merge(local.pins, {")
    for key in ("tags", "snapshot_tags"):
        assert source[key] == "${local.tags}"
    (build,) = template["build"]
    (post,) = build["post-processor"]
    assert post['"manifest"']["custom_data"] == "${local.ami_facts}"


def test_one_variable_is_the_model_host_path_of_the_ami_and_the_fleet(template, locals_, variables):
    """model_host_path is baked as the instance storage's mount point and published in the tags and Packer's manifest
    (custom_data.model_host_path), where roles/fleet_capacity reads it for the agent and the task definition."""
    variable = variables["model_host_path"]
    assert unquote(variable["default"]) == "/mnt/models"
    spec = yaml.safe_load((REPO / "roles" / "instance_storage" / "meta" / "argument_specs.yml").read_text())
    assert spec["argument_specs"]["main"]["options"]["instance_storage_mount_point"]["default"] == unquote(variable["default"])
    assert "instance_storage_mount_point = var.model_host_path" in locals_["ansible_extra_vars"]
    assert "model_host_path = var.model_host_path" in locals_["ami_facts"]
    # The architecture too: roles/fleet_capacity publishes it for the task definition's runtimePlatform and the image.
    assert "architecture = var.architecture" in locals_["ami_facts"]
    assert "custom_data" in (REPO / "roles" / "fleet_capacity" / "tasks" / "architecture.yml").read_text()
    (validation,) = variable["validation"]
    pattern = re.search(r'regex\("(.*)", var\.model_host_path\)', validation["condition"])[1]
    for good in ("/mnt/models", "/data/nvme-0/models", "/srv/inferops/models"):
        assert re.fullmatch(pattern, good), good
    for bad in ("/", "mnt/models", "/mnt/my models", "/mnt/models/", "/mnt/$(reboot)"):
        assert not re.fullmatch(pattern, bad), bad
    fleet_capacity = (REPO / "roles" / "fleet_capacity" / "tasks" / "model_host_path.yml").read_text()
    assert "custom_data" in fleet_capacity and "model_host_path" in fleet_capacity
