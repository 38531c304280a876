# inferops.triton_ecs — one command each for a newcomer: `make deploy-local`, `make test`.
SHELL := /bin/bash
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/.build/collections
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg

PYTEST := $(BIN)/pytest -p no:cacheprovider

.PHONY: setup services lint sanity unit integration molecule test deploy-local deploy-local-twice bench

setup:  ## Debian packages (as root), .venv with pinned Python packages, collection link
	scripts/setup.sh

services: setup  ## dockerd, the local registry on 127.0.0.1:5000, and the local inventory's moto server on 127.0.0.1:5100
	scripts/services.sh start

lint: setup
	$(BIN)/yamllint -s .
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/ansible-lint
	@for p in deploy.yml playbooks/*.yml; do $(BIN)/ansible-playbook --syntax-check -i inventories/local $$p >/dev/null || exit 1; done
	@for p in deploy.yml playbooks/*.yml; do $(BIN)/ansible-playbook --syntax-check -i inventories/example $$p >/dev/null || exit 1; done

sanity: setup
	scripts/sanity.sh

unit: setup
	$(PYTEST) tests/unit

integration: services
	$(PYTEST) tests/integration

molecule: services
	scripts/molecule.sh

test: lint sanity unit integration molecule deploy-local-twice  ## everything CI runs

# The CPU stand-in for NGC's Triton base image (built locally once), then deploy.yml on the local inventory.
DEPLOY_LOCAL = $(BIN)/python -m tests.harness.images && $(BIN)/ansible-playbook deploy.yml -i inventories/local

deploy-local: services  ## the main job on the embedded default inventory (a local rehearsal of the AWS flow)
	$(DEPLOY_LOCAL)

deploy-local-twice: services  ## the second run of the local rehearsal must change nothing
	$(DEPLOY_LOCAL)
	{ $(DEPLOY_LOCAL); } | tee .build/deploy-local-second.log
	grep -Eq '^localhost +: ok=[0-9]+ +changed=0 +unreachable=0 +failed=0' .build/deploy-local-second.log

bench: services
	@for b in bench/*.py; do echo "# $$b"; $(BIN)/python $$b || exit 1; done
