# The pins of one AMI release. Change them here (and only here), then build and test a new AMI: docs/ami.md.
nvidia_driver_version            = "580.95.05"
nvidia_driver_kmod_flavour       = "auto"
nvidia_driver_repository         = "amazon"
nvidia_container_toolkit_version = "1.17.8"
ecs_agent_ecs_init_version       = "1.98.0"
ecs_agent_docker_version         = "25.0.8"
