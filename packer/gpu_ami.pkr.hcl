# The Amazon Linux 2023 ECS GPU AMI: `packer init packer/ && packer validate packer/ && packer build packer/`.
# The build instance needs no GPU: nothing in the bake runs nvidia-smi or loads the module.

locals {
  build_time = formatdate("YYYYMMDDhhmmss", timestamp())
  ami_name   = "${var.ami_name_prefix}-${var.architecture}-${local.build_time}"

  # One variable selects the architecture: the base image, the build instance, and the roles' packages ("aarch64" is
  # what Ansible and dnf call arm64; NVIDIA's repository calls it "sbsa").
  source_ami_name_filter = var.source_ami_name_filter != "" ? var.source_ami_name_filter : "al2023-ami-2023.*-kernel-6.1-${var.architecture}"
  instance_type          = var.instance_type != "" ? var.instance_type : lookup({ x86_64 = "g4dn.xlarge", arm64 = "g5g.xlarge" }, var.architecture, "")
  package_architecture   = lookup({ x86_64 = "x86_64", arm64 = "aarch64" }, var.architecture, "")

  # Where the build's playbook finds inferops.triton_ecs: in an installed collection (its MANIFEST.json next to
  # packer/) the collections root it is installed under; in a checkout the link `make setup` makes in .build/.
  # Set here rather than through the checkout's ansible.cfg, which the collection tarball does not ship.
  collections_path = fileexists("${path.root}/../MANIFEST.json") ? abspath("${path.root}/../../../..") : abspath("${path.root}/../.build/collections")

  # Every pin, passed to the playbook and written into the tags from this one map, so they cannot drift apart.
  pins = {
    nvidia_driver_version            = var.nvidia_driver_version
    nvidia_driver_kmod_flavour       = var.nvidia_driver_kmod_flavour
    nvidia_driver_repository         = var.nvidia_driver_repository
    nvidia_container_toolkit_version = var.nvidia_container_toolkit_version
    ecs_agent_ecs_init_version       = var.ecs_agent_ecs_init_version
    ecs_agent_docker_version         = var.ecs_agent_docker_version
  }
  # The model host path is baked as the instance storage's mount point (the AMI's manifest records it) and handed to
  # the fleet through the tags and Packer's manifest (custom_data), where roles/fleet_capacity reads it.
  ansible_extra_vars = merge(local.pins, { ami_cleanup_build_id = local.ami_name, nvidia_driver_architecture = local.package_architecture, instance_storage_mount_point = var.model_host_path })
  ami_facts          = merge(local.pins, { model_host_path = var.model_host_path, architecture = var.architecture })

  tags = merge(var.tags, local.ami_facts, {
    Name               = local.ami_name
    architecture       = var.architecture
    os_release_version = var.os_release_version
    built_by           = "packer:inferops.triton_ecs"
  })
}

source "amazon-ebs" "gpu_ami" {
  region          = var.region
  ami_name        = local.ami_name
  ami_description = "ECS GPU AMI (Amazon Linux 2023, ${var.architecture}), NVIDIA driver ${var.nvidia_driver_version}"
  instance_type   = local.instance_type

  source_ami_filter {
    filters = {
      name                = local.source_ami_name_filter
      architecture        = var.architecture
      root-device-type    = "ebs"
      virtualization-type = "hvm"
    }
    owners      = var.source_ami_owners
    most_recent = true
  }

  # Reached through SSM Session Manager: the temporary security group opens nothing to the internet.
  communicator                          = "ssh"
  ssh_username                          = var.ssh_username
  ssh_interface                         = "session_manager"
  subnet_id                             = var.subnet_id
  associate_public_ip_address           = var.associate_public_ip_address
  temporary_security_group_source_cidrs = var.build_ingress_cidrs
  temporary_iam_instance_profile_policy_document {
    Version = "2012-10-17"
    Statement {
      Effect = "Allow"
      Action = [
        "ssm:UpdateInstanceInformation",
        "ssmmessages:CreateControlChannel",
        "ssmmessages:CreateDataChannel",
        "ssmmessages:OpenControlChannel",
        "ssmmessages:OpenDataChannel",
        "ec2messages:AcknowledgeMessage",
        "ec2messages:DeleteMessage",
        "ec2messages:FailMessage",
        "ec2messages:GetEndpoint",
        "ec2messages:GetMessages",
        "ec2messages:SendReply",
      ]
      Resource = ["*"]
    }
  }

  # IMDSv2 only, on the build instance and on every instance launched from the AMI.
  metadata_options {
    http_endpoint               = "enabled"
    http_tokens                 = "required"
    http_put_response_hop_limit = 2
  }
  imds_support = "v2.0"

  launch_block_device_mappings {
    device_name           = "/dev/xvda"
    volume_size           = var.root_volume_size_gib
    volume_type           = "gp3"
    encrypted             = true
    kms_key_id            = var.kms_key_id
    delete_on_termination = true
  }
  encrypt_boot = true
  kms_key_id   = var.kms_key_id

  tags          = local.tags
  snapshot_tags = local.tags
  run_tags      = local.tags
}

build {
  name    = "gpu-ami"
  sources = ["source.amazon-ebs.gpu_ami"]

  # The driver's module is built for the running kernel, so first move to the final kernel and boot into it.
  provisioner "shell" {
    inline = [
      "set -eux",
      "sudo dnf -y --releasever=${var.os_release_version} upgrade",
    ]
  }

  provisioner "shell" {
    inline            = ["sudo systemctl reboot"]
    expect_disconnect = true
  }

  provisioner "shell" {
    pause_before = "30s"
    inline = [
      "set -eux",
      "newest=$(rpm -q kernel --queryformat '%%{VERSION}-%%{RELEASE}.%%{ARCH}\\n' | sort -V | tail -n 1)",
      "test \"$(uname -r)\" = \"$newest\"",
    ]
  }

  provisioner "ansible" {
    playbook_file = "${path.root}/../playbooks/build_ami.yml"
    user          = var.ssh_username
    use_proxy     = false
    ansible_env_vars = [
      "ANSIBLE_COLLECTIONS_PATH=${local.collections_path}",
      "ANSIBLE_HOST_KEY_CHECKING=False",
      "ANSIBLE_PIPELINING=True",
    ]
    extra_arguments = ["--extra-vars", jsonencode(local.ansible_extra_vars)]
  }

  post-processor "manifest" {
    output      = "${path.root}/manifest.json"
    strip_path  = true
    custom_data = local.ami_facts
  }
}
