# Every input of packer/gpu_ami.pkr.hcl. The release pins live in release.auto.pkrvars.hcl.

variable "region" {
  type        = string
  description = "AWS region the AMI is built in (and registered to)."
  default     = "us-east-1"
}

variable "ami_name_prefix" {
  type        = string
  description = "Prefix of the AMI name; a UTC timestamp is appended so every build is unique."
  default     = "inferops-ecs-gpu-al2023"
}

variable "architecture" {
  type        = string
  description = "CPU architecture of the AMI: \"x86_64\" (g4dn, g5, g6, g6e, p3, p4d, p5 ...) or \"arm64\" (Graviton: g5g). Selects the base image, the build instance type and the roles' package architecture."
  default     = "x86_64"

  validation {
    condition     = contains(["x86_64", "arm64"], var.architecture)
    error_message = "architecture must be \"x86_64\" or \"arm64\"."
  }
}

variable "source_ami_name_filter" {
  type        = string
  description = "Name filter for the Amazon Linux 2023 base image (the most recent match is used). Empty: AL2023 with kernel 6.1 for var.architecture."
  default     = ""
}

variable "source_ami_owners" {
  type        = list(string)
  description = "Accounts trusted to own the base image (\"amazon\" for Amazon's own AL2023 AMIs)."
  default     = ["amazon"]
}

variable "instance_type" {
  type        = string
  description = "Build instance type, of var.architecture. Empty: g4dn.xlarge (x86_64) or g5g.xlarge (arm64); the build never needs the GPU, so a CPU type works too."
  default     = ""
}

variable "subnet_id" {
  type        = string
  description = "Subnet of the build instance; it needs a route to SSM (NAT, or VPC endpoints for ssm, ssmmessages, ec2messages). Empty: the default VPC."
  default     = ""
}

variable "associate_public_ip_address" {
  type        = bool
  description = "Give the build instance a public IP (only for subnets without NAT or SSM endpoints; no inbound rule is opened either way)."
  default     = false
}

variable "build_ingress_cidrs" {
  type        = list(string)
  description = "Source CIDRs of the temporary security group's SSH rule. Session Manager needs no inbound rule, so by default it is closed to everything but this placeholder. Never the whole internet."
  default     = ["127.0.0.1/32"]

  validation {
    condition     = !contains(var.build_ingress_cidrs, "0.0.0.0/0") && !contains(var.build_ingress_cidrs, "::/0")
    error_message = "The build instance must not accept SSH from anywhere: connect through Session Manager."
  }
}

variable "root_volume_size_gib" {
  type        = number
  description = "Size of the encrypted gp3 root volume in GiB (drivers, Docker images of the fleet's first start)."
  default     = 60
}

variable "kms_key_id" {
  type        = string
  description = "KMS key for the root volume and the AMI's snapshot. Empty: the account's default EBS key."
  default     = ""
}

variable "ssh_username" {
  type        = string
  description = "Login user of the base image (tunnelled through Session Manager)."
  default     = "ec2-user"
}

variable "os_release_version" {
  type        = string
  description = "AL2023 release (dnf --releasever) the build upgrades to before the reboot, e.g. \"2023.9.20251110\"; \"latest\" follows the newest."
  default     = "latest"
}

variable "model_host_path" {
  type        = string
  description = "The model host path: where the instance store is mounted and the model agent hydrates the models, and what the Triton task mounts at /models. Recorded in the AMI's manifest, its tags and Packer's manifest (custom_data), from which roles/fleet_capacity publishes it for the agent's configuration and the task definition: set it here only."
  default     = "/mnt/models"

  validation {
    condition     = can(regex("^/[A-Za-z0-9._/-]*[A-Za-z0-9._-]$", var.model_host_path))
    error_message = "model_host_path must be an absolute path other than /, of letters, digits, '.', '_', '-' and '/'."
  }
}

variable "nvidia_driver_version" {
  type        = string
  description = "The one NVIDIA driver version every nvidia*, kmod-nvidia* and libnvidia* package is pinned and locked to."
}

variable "nvidia_driver_kmod_flavour" {
  type        = string
  description = "Kernel-module flavour loaded at boot: \"auto\" (open for Turing and newer: T4, T4G, A10G, L4, L40S, A100, H100, H200; proprietary for Volta: V100), or \"open\" / \"proprietary\" to force one. The AMI carries both on x86_64, open only on arm64."
  default     = "auto"

  validation {
    condition     = contains(["auto", "open", "proprietary"], var.nvidia_driver_kmod_flavour)
    error_message = "nvidia_driver_kmod_flavour must be \"auto\", \"open\" or \"proprietary\"."
  }
}

variable "nvidia_driver_repository" {
  type        = string
  description = "Driver repository: \"amazon\" (nvidia-release, amazonlinux-nvidia.repo) or \"nvidia\" (NVIDIA's cuda-amzn2023)."
  default     = "amazon"

  validation {
    condition     = contains(["amazon", "nvidia"], var.nvidia_driver_repository)
    error_message = "nvidia_driver_repository must be \"amazon\" or \"nvidia\"."
  }
}

variable "nvidia_container_toolkit_version" {
  type        = string
  description = "NVIDIA Container Toolkit version, pinned and locked."
}

variable "ecs_agent_ecs_init_version" {
  type        = string
  description = "ecs-init (ECS agent) version, pinned and locked."
}

variable "ecs_agent_docker_version" {
  type        = string
  description = "Docker version, pinned and locked."
}

variable "tags" {
  type        = map(string)
  description = "Extra tags for the AMI, its snapshot and the build instance (team, cost centre, ...)."
  default     = {}
}
