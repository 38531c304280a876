# inferops.triton_ecs — one command each for a newcomer: `make deploy-local`, `make test`.
SHELL := /bin/bash
VENV := .venv
BIN := $(CURDIR)/$(VENV)/bin
export PATH := $(BIN):$(PATH)
export ANSIBLE_COLLECTIONS_PATH := $(CURDIR)/.build/collections
export ANSIBLE_CONFIG := $(CURDIR)/ansible.cfg

PYTEST := $(BIN)/pytest -p no:cacheprovider

.PHONY: setup services lint sanity unit integration molecule test deploy-local bench

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

# Two workers: the tests mostly wait (servers, bakes, drains). Whole files per worker: a module's fixtures are
# built once and its fixed names and ports (the rehearsal's standby containers) are used by one worker at a time.
integration: services
	$(PYTEST) -n 2 --dist loadfile tests/integration

molecule: services
	scripts/molecule.sh

# deploy-local as a newcomer runs it, once: tests/integration/test_deploy_local.py runs deploy.yml on the same inventory
# twice and asserts the second run changes nothing.
test: lint sanity unit integration molecule deploy-local  ## everything CI runs

# The CPU stand-in for NGC's Triton base image (built locally once), then deploy.yml on the local inventory.
deploy-local: services  ## the main job on the embedded default inventory (a local rehearsal of the AWS flow)
	$(BIN)/python -m tests.harness.images && $(BIN)/ansible-playbook deploy.yml -i inventories/local

bench: services
	@for b in bench/*.py; do echo "# $$b"; $(BIN)/python $$b || exit 1; done
