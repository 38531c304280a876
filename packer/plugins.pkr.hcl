# Packer and its plugins, pinned: `packer init packer/` installs exactly these.
packer {
  required_version = ">= 1.10.0, < 2.0.0"
  required_plugins {
    amazon = {
      source  = "github.com/hashicorp/amazon"
      version = "= 1.3.3"
    }
    ansible = {
      source  = "github.com/hashicorp/ansible"
      version = "= 1.1.1"
    }
  }
}
